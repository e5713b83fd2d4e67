//! The `cinder-operator` program built inside the test package, for the tests that run the
//! operator as its own process (crashes, restarts, replicas): cargo builds it with the tests and
//! their features, so no test needs a second build of the operator crate with other features.

fn main() -> std::process::ExitCode {
    cinder_operator::entry::main()
}
