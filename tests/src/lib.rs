//! cinder-e2e: end-to-end tests across the crates, run against the embedded cluster.
//! The tests live in `tests/tests/`; this library holds their shared helpers.
