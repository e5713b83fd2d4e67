//! Kubernetes helpers the rest of the crate builds on, depending on nothing in it but the
//! vocabulary of its own layer (`names`, `conditions`): the external kinds the operator reads
//! (external-secrets stores, mariadb-operator MariaDB), APIs scoped to the watched namespace,
//! finalizers, the ownership label of children on a target cluster, the field manager of
//! server-side applies and the apply itself, creating what may exist already, the label-selected
//! sweep, one shared watch per kind ([`shared_watch`]) and the cached reads served from those
//! watches' stores ([`reader`]), the discovery probes of optional CRD-backed kinds
//! ([`capability`]), and [`ApiErrorExt`] for the API answers the operator treats as expected
//! (404, 409).

pub mod api_error;
pub mod apply;
pub mod capability;
pub mod create;
pub mod finalizer;
pub mod ownership;
pub mod reader;
pub mod resources;
pub mod scope;
pub mod shared_watch;
pub mod sweep;

pub(crate) use api_error::ApiErrorExt;
pub(crate) use apply::{FIELD_MANAGER, apply};
pub use create::create_if_absent;
pub(crate) use create::replace_unless_changed;
pub(crate) use scope::{scoped, scoped_dynamic};
pub(crate) use sweep::{delete_if_present, sweep};
