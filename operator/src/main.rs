//! The `cinder-operator` binary (see [`cinder_operator::entry`]).

fn main() -> std::process::ExitCode {
    cinder_operator::entry::main()
}
