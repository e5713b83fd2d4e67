//! Real servers behind the embedded cluster's fixtures: a MariaDB server ([`MariaDbServer`]) the
//! mariadb-operator fixture reconciles Database, User and Grant against, and a RabbitMQ broker
//! ([`RabbitMqServer`]), each a Debian package's server started with a throwaway directory on a
//! free loopback port, stopped by its own pid when dropped, its directory removed. Pods reach
//! them through a selector-less Service whose EndpointSlice names the loopback port
//! ([`expose::expose`]): the service proxy (which runs on the host) forwards the Service's
//! ClusterIP there.

pub mod expose;
pub mod keystone;
pub mod mariadb;
pub mod process;
pub mod rabbitmq;

pub use expose::expose;
pub use keystone::{KeystoneOptions, KeystoneServer};
pub use mariadb::MariaDbServer;
pub use rabbitmq::RabbitMqServer;
