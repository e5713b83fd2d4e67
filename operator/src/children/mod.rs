//! The Cinder's children on the cluster: their kinds ([`kinds`]), creating them with the common
//! labels and their owner ([`create`]), finding them by label ([`list`]), removing an optional child the spec does not
//! ask for ([`optional`]), what the live workloads mount and a sweep must therefore keep
//! ([`mod@mounts`]), and the backends' projection Secrets: their labels, their sweep and the
//! credential check ([`projection`]).

pub mod create;
pub mod kinds;
pub mod list;
pub mod mounts;
pub mod optional;
pub mod projection;

pub(crate) use create::{
    child_meta, ensure_config_map, ensure_derived_secret, management_child_meta,
};
pub use list::{list_children, selector};
pub(crate) use mounts::Mounts;
pub use mounts::{job_running, mounts};
pub(crate) use optional::{NotRequired, already_not_required, remove_unwanted};
