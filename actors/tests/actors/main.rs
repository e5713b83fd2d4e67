//! Integration tests of the lock core: one module per scenario, `support` for the shared helpers.

mod cancel_points;
mod cancellation;
mod concurrency;
mod contexts;
mod explain_fixtures;
mod explain_fuzz;
mod plan_properties;
mod priority_and_interior;
mod reference_examples;
mod refusals;
mod retirement;
mod send_sync;
mod shutdown;
mod support;
