//! Real servers behind the embedded cluster's fixtures: a MariaDB server ([`MariaDbServer`]) the
//! mariadb-operator fixture reconciles Database, User and Grant against, a RabbitMQ broker
//! ([`RabbitMqServer`]) and a single-node Ceph cluster ([`CephServer`]), each a Debian package's
//! server started with a throwaway directory on a free port, stopped by its own pid when
//! dropped, its directory removed. Pods reach MariaDB and RabbitMQ (on loopback) through a
//! selector-less Service whose EndpointSlice names the loopback port ([`expose::expose`]): the
//! service proxy (which runs on the host) forwards the Service's ClusterIP there. Ceph's clients
//! connect to the addresses its maps advertise, so it binds the host's primary address, which
//! pods reach directly through their node's bridge.

pub mod ceph;
pub mod expose;
pub mod keystone;
pub mod mariadb;
pub mod process;
pub mod rabbitmq;

pub use ceph::CephServer;
pub use expose::expose;
pub use keystone::{KeystoneOptions, KeystoneServer};
pub use mariadb::MariaDbServer;
pub use rabbitmq::RabbitMqServer;
