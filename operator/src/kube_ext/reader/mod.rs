//! The cached reader: the steps, the deletion path and the satellites read the objects they
//! need from the shared watches' reflector stores of the cluster the object lives on
//! ([`ClusterStores`]), bound to the running task by a [`ReadScope`]; a read the stores cannot
//! answer goes to the API server. Writes always go to the API server.

pub mod index;
pub mod scope;
pub mod stores;

pub use index::Field;
pub use scope::{ReadScope, children, management, within};
pub use stores::ClusterStores;
