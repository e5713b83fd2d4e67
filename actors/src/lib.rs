//! cinder-actors: the concurrent resource cache of seed 000 expressed as actors.
//!
//! This crate owns the schema (kinds, dependencies, ranks), the pure query planner
//! (dedupe, synthetic parent reads, id fill-in, merge and sort in the total order),
//! one actix actor per (kind, id) holding its value and its shared/exclusive lock,
//! the lock-coordinator actor that carries out Lock / NestedLock, and the inspection
//! snapshots the admin endpoint shows.
