//! The cached reader: the steps, the deletion path and the satellites read the objects they
//! need from the shared watches' reflector stores of the cluster the object lives on
//! ([`ClusterStores`]), passed to each read explicitly (the management cluster's from the
//! operator context, the children's from the step context); a read the stores cannot answer
//! goes to the API server. Writes always go to the API server.

pub mod index;
pub mod stores;

pub(crate) use index::Field;
pub use stores::ClusterStores;
