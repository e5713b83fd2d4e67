//! The `cinder-operator` binary (see [`cinder_operator::entry`]).

/// mimalloc rather than glibc malloc: allocation was a sixth of the operator's CPU at a
/// thousand Cinders (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cinder_operator::entry::main()
}
