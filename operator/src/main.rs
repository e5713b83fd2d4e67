//! The `cinder-operator` binary (see [`cinder_operator::entry`]; its allocator is the crate's).

fn main() -> std::process::ExitCode {
    cinder_operator::entry::main()
}
