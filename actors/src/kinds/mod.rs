//! The kinds of the standard schema, one file each as in the reference cache: the kind's query
//! constructors (the reference cache's calls in snake_case, all re-exported by `query`). The kinds
//! as a compile-time enum are in `kind.rs`; their results' typed methods in `results.rs`.

/// The constructors of a kind without parents or key: list, read, inconsistent read, upsert,
/// delete.
macro_rules! simple_kind {
    ($kind:literal, $list:ident, $read:ident, $iread:ident, $upsert:ident, $delete:ident) => {
        #[doc = concat!("List every ", $kind, ".")]
        pub fn $list() -> $crate::subquery::Subquery {
            $crate::subquery::Subquery::list($kind)
        }
        #[doc = concat!("Read-lock a ", $kind, ".")]
        pub fn $read(id: &str) -> $crate::subquery::Subquery {
            $crate::subquery::Subquery::read($kind, id)
        }
        #[doc = concat!("Copy a ", $kind, " without locking.")]
        pub fn $iread(id: &str) -> $crate::subquery::Subquery {
            $crate::subquery::Subquery::inconsistent_read($kind, id)
        }
        #[doc = concat!("Write-lock a ", $kind, " to upsert it.")]
        pub fn $upsert(id: &str) -> $crate::subquery::Subquery {
            $crate::subquery::Subquery::upsert($kind, id)
        }
        #[doc = concat!("Write-lock a ", $kind, " to delete it.")]
        pub fn $delete(id: &str) -> $crate::subquery::Subquery {
            $crate::subquery::Subquery::delete($kind, id)
        }
    };
}

pub mod autogrow_policy;
pub mod backend;
pub mod device;
pub mod group_snapshot;
pub mod node;
pub mod snapshot;
pub mod storage_class;
pub mod subordinate_volume;
pub mod volume;
pub mod volume_publication;
