//! The `cinder-operator lock-plan` subcommand: reads the JSON document of design section 3 from a
//! file (or `-` for stdin) and prints what Lock / NestedLock would do, like SQL EXPLAIN.
//! Exit 0 when the document was understood (even if a phase is refused), 2 with one line on
//! stderr naming the bad field otherwise.

use cinder_actors::{Schema, explain_str};
use std::io::Read;
use std::process::ExitCode;

/// Runs the subcommand on `file` (a path, or `-` for standard input).
pub(crate) fn run(file: &str) -> ExitCode {
    let text = match read_input(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "cinder-operator lock-plan: cannot read {file}: {}",
                one_line(&e.to_string())
            );
            return ExitCode::from(2);
        }
    };
    match explain_str(&Schema::standard(), &text) {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cinder-operator lock-plan: {}", one_line(&e.to_string()));
            ExitCode::from(2)
        }
    }
}

fn read_input(file: &str) -> std::io::Result<String> {
    if file == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        Ok(s)
    } else {
        std::fs::read_to_string(file)
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
