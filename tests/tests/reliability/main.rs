//! Reliability under crashes and API faults, measured from the simulator's records: the operator
//! binary SIGKILLed at seeded random points through a Cinder's whole life ([`crash_anywhere`]),
//! fault storms with a bounded request rate and no hot loop ([`fault_storm`]), a quiet steady
//! state ([`steady_state`]), per-object state pruned with its object ([`pruning`]), specs the
//! CRD schema admits driven through the steps ([`spec_fuzz`]), and a replica of two sharded
//! ones killed mid-convergence ([`shard_takeover`]). One module per scenario; the helpers are
//! `cinder_e2e::operator_process` and `cinder_e2e::request_checks`.

mod crash_anywhere;
mod crash_recovery;
mod fault_storm;
mod pruning;
mod shard_takeover;
mod spec_fuzz;
mod steady_state;
