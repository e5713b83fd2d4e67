//! Real clients against the embedded cluster: kubectl (skipped with a printed reason when it is
//! not on PATH) and the Python `kubernetes` client (installed into a virtual environment by the
//! test; skipped with a printed reason when it cannot be installed).

mod kubectl;
mod kubectl_auth;
mod kubectl_lifecycle;
mod kubectl_process_logs;
mod kubectl_services;
mod kubectl_typed;
mod kubectl_workloads;
mod python_client;
mod python_e2e;
mod tools;
