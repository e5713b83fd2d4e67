//! Build script: the commit the binary is built from, for `--version` and the
//! `cinder_operator_build_info` metric (`CINDER_OPERATOR_COMMIT`, "unknown" outside a git
//! checkout; an explicit `CINDER_OPERATOR_COMMIT` in the build environment wins, as in an
//! image build from a source archive).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=CINDER_OPERATOR_COMMIT");
    let commit = std::env::var("CINDER_OPERATOR_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the ref it names (a commit), or
    // packed-refs when that ref is packed. Only existing files are named: cargo reruns a build
    // script on every build while a named file is missing.
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(name) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &name]));
        watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    }
    for path in watched.into_iter().flatten() {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rustc-env=CINDER_OPERATOR_COMMIT={commit}");
}
