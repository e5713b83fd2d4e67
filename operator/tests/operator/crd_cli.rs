//! `cinder-operator crdgen` through the binary: prints the three CRDs as a YAML stream, and with
//! `--out-dir` writes exactly the files of deploy/crds/.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cinder-operator"))
}

#[test]
fn crdgen_prints_a_yaml_stream_of_three_crds() {
    let out = bin().arg("crdgen").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, cinder_operator::cmd_crdgen::yaml_stream().unwrap());
    let kinds: Vec<String> = serde_norway::Deserializer::from_str(&text)
        .map(|d| {
            let v: serde_norway::Value = serde::Deserialize::deserialize(d).unwrap();
            v["spec"]["names"]["kind"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(kinds, ["Cinder", "CinderBackend", "CinderBackupBackend"]);
}

#[test]
fn crdgen_out_dir_writes_the_deploy_files() {
    let dir = tempfile::tempdir().unwrap();
    let status = bin()
        .arg("crdgen")
        .arg("--out-dir")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let mut written: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(
        written,
        [
            "cinderbackends.cinder.openstack.c5c3.io.yaml",
            "cinderbackupbackends.cinder.openstack.c5c3.io.yaml",
            "cinders.cinder.openstack.c5c3.io.yaml",
            "kustomization.yaml"
        ]
    );
    for (name, content) in cinder_operator::cmd_crdgen::files().unwrap() {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(name)).unwrap(),
            content
        );
    }
}

#[test]
fn crdgen_reports_an_unwritable_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = bin()
        .arg("crdgen")
        .arg("--out-dir")
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write"));
}
