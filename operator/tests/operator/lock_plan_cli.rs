//! The `lock-plan` subcommand through the binary: worked example 1 of docs/locking.md (publish a
//! volume), bad inputs, and truncated and mutated documents (exit 0 with a plan or 2 with one
//! line, never a panic; the library's own fuzzing is `cinder-actors`' `explain_fuzz`).

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn run_with_stdin(input: &str) -> Output {
    run_with_stdin_bytes(input.as_bytes())
}

fn run_with_stdin_bytes(input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cinder-operator"))
        .args(["lock-plan", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../actors/tests/actors/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path).unwrap()
}

fn steps(v: &Value) -> Vec<(String, String, String)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["mode"].as_str().unwrap().to_string(),
                s["kind"].as_str().unwrap().to_string(),
                s["id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn st(mode: &str, kind: &str, id: &str) -> (String, String, String) {
    (mode.to_string(), kind.to_string(), id.to_string())
}

#[test]
fn first_example_prints_acquisitions_and_reverse_release() {
    let out = run_with_stdin(&fixture("example1.json"));
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let expected = vec![
        st("read", "root", "."),
        st("write", "backend", "backend1"),
        st("read", "node", "node1"),
        st("write", "volume", "volume1"),
        st("write", "volumePublication", "volume1.node1"),
        st("write", "snapshot", "snap1"),
    ];
    assert_eq!(steps(&v["lock"]["acquire"]), expected);
    let mut reversed = expected.clone();
    reversed.reverse();
    assert_eq!(steps(&v["lock"]["release"]), reversed);
    let want: Value = serde_json::from_str(&fixture("example1.expected.json")).unwrap();
    assert_eq!(v, want);
}

#[test]
fn file_argument_and_second_example() {
    let path = format!(
        "{}/../actors/tests/actors/fixtures/example2.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = Command::new(env!("CARGO_BIN_EXE_cinder-operator"))
        .args(["lock-plan", &path])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want: Value = serde_json::from_str(&fixture("example2.expected.json")).unwrap();
    assert_eq!(v, want);
}

#[test]
fn refused_phase_still_exits_zero() {
    let doc = r#"{"queries": [[{"call": "ReadVolume", "args": ["a"]}, {"call": "UpsertVolume", "args": ["b", "x"]}]]}"#;
    let out = run_with_stdin(doc);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["lock"]["error"]["code"], "duplicate_operation");
}

fn assert_bad(input: &str, needle: &str) {
    let out = run_with_stdin(input);
    assert_eq!(out.status.code(), Some(2), "input {input}");
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(err.contains(needle), "{err:?} should name {needle:?}");
}

#[test]
fn bad_inputs_exit_two_with_one_line() {
    assert_bad("{not json", "not JSON");
    assert_bad(
        r#"{"queries": [[{"call": "FrobVolume"}]]}"#,
        "queries[0][0].call",
    );
    assert_bad(
        r#"{"queries": [[{"call": "UpsertBackend", "args": ["b"]}]]}"#,
        "queries[0][0].args",
    );
    assert_bad(
        r#"{"cache": {"gadget": [{"id": "g"}]}, "queries": []}"#,
        "cache.gadget",
    );
    assert_bad(
        r#"{"queries": [], "nested": [[{"call": "ReadNode", "args": []}]]}"#,
        "nested[0][0].args",
    );
}

#[test]
fn missing_file_exits_two() {
    let out = Command::new(env!("CARGO_BIN_EXE_cinder-operator"))
        .args(["lock-plan", "/nonexistent/lock-plan.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr)
            .unwrap()
            .trim_end()
            .lines()
            .count(),
        1
    );
}

/// Exit 0 with a JSON plan on stdout, or 2 with nothing on stdout and one line on stderr.
fn assert_plan_or_coded_error(input: &[u8]) {
    let out = run_with_stdin_bytes(input);
    let shown = String::from_utf8_lossy(input);
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => assert!(
            serde_json::from_slice::<Value>(&out.stdout).is_ok(),
            "{shown:?}: exit 0 without a JSON plan"
        ),
        Some(2) => {
            assert!(out.stdout.is_empty(), "{shown:?}");
            assert_eq!(err.trim_end().lines().count(), 1, "{shown:?}: {err:?}");
        }
        other => panic!("{shown:?}: exit {other:?}, stderr {err:?}"),
    }
}

#[test]
fn truncated_and_mutated_documents_exit_zero_or_two_never_panic() {
    let doc = fixture("example1.json").into_bytes();
    // Every 13th prefix of a valid document (cut inside keys, strings, numbers, arrays).
    for end in (0..doc.len()).step_by(13) {
        assert_plan_or_coded_error(&doc[..end]);
    }
    // One byte replaced, at every 17th position, by structure, a digit, a letter, a NUL or a
    // byte that is not UTF-8.
    let replacements = [b'{', b']', b'"', b',', b'7', b'x', 0, 0xff];
    for (n, at) in (0..doc.len()).step_by(17).enumerate() {
        let mut mutated = doc.clone();
        mutated[at] = replacements[n % replacements.len()];
        assert_plan_or_coded_error(&mutated);
    }
}
