//! The operator image of deploy/image/build.sh: its OCI archive names the image deploy/ runs, its
//! configuration runs the binary as the unprivileged user, and its entry point starts from the
//! unpacked image (`--version`, `--help`), built without the embedded cluster (`sim` is not a
//! subcommand, `run --embedded` is refused with one line).
//!
//! The archive is built by `deploy/image/build.sh` (which `.ci/run` runs); without it the test
//! is skipped with the reason, except under `CI=true`, where a missing archive fails.

use cinder_e2e::deploy_helpers::{deploy_dir, deploy_manifests, of_kind};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const IMAGE: &str = concat!("ghcr.io/c5c3/cinder-operator:", env!("CARGO_PKG_VERSION"));

fn archive() -> PathBuf {
    let dir = std::env::var_os("CINDER_IMAGE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/cinder-image"));
    dir.join(concat!(
        "cinder-operator-",
        env!("CARGO_PKG_VERSION"),
        ".oci.tar"
    ))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A blob of the OCI layout by its digest (`sha256:…`).
fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (algorithm, hex) = digest.split_once(':').unwrap();
    layout.join("blobs").join(algorithm).join(hex)
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn untar(archive: &Path, into: &Path) {
    std::fs::create_dir_all(into).unwrap();
    let out = Command::new("tar")
        .arg("-xf")
        .arg(archive)
        .arg("-C")
        .arg(into)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tar -xf {}: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The unpacked image's entry point, run in the image's root as its user.
fn run_in(rootfs: &Path, user: &str, args: &[&str]) -> std::process::Output {
    Command::new("/usr/sbin/chroot")
        .arg(format!("--userspec={user}"))
        .arg(rootfs)
        .arg("/usr/local/bin/cinder-operator")
        .args(args)
        .env_clear()
        .output()
        .unwrap()
}

#[test]
fn the_image_starts_as_the_deployment_names_it() {
    let archive = archive();
    let in_ci = std::env::var_os("CI").is_some();
    if !archive.exists() || !is_root() {
        let reason = if archive.exists() {
            "the unpacked image is run with chroot, which needs root".to_string()
        } else {
            format!(
                "{} is missing: deploy/image/build.sh builds it",
                archive.display()
            )
        };
        assert!(!in_ci, "under CI: {reason}");
        println!("SKIPPED the_image_starts_as_the_deployment_names_it: {reason}");
        return;
    }

    // deploy/ runs the image the build writes.
    let manifests = deploy_manifests().unwrap();
    let deployments = of_kind(&manifests, "Deployment");
    let images: Vec<String> = deployments
        .iter()
        .flat_map(|d| {
            let object = serde_json::to_value(&d.object).unwrap();
            object["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["image"].as_str().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(images, [IMAGE], "deploy/ ({})", deploy_dir().display());

    let work = tempfile::tempdir().unwrap();
    let layout = work.path().join("layout");
    untar(&archive, &layout);
    let index = json(&layout.join("index.json"));
    let manifest = &index["manifests"][0];
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.ref.name"], IMAGE,
        "{index}"
    );
    let manifest = json(&blob(&layout, manifest["digest"].as_str().unwrap()));
    let config = json(&blob(
        &layout,
        manifest["config"]["digest"].as_str().unwrap(),
    ));
    assert_eq!(config["config"]["User"], "65532:65532", "{config}");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/cinder-operator"])
    );
    let rootfs = work.path().join("rootfs");
    for layer in manifest["layers"].as_array().unwrap() {
        untar(&blob(&layout, layer["digest"].as_str().unwrap()), &rootfs);
    }

    let version = run_in(&rootfs, "65532:65532", &["--version"]);
    let stdout = String::from_utf8_lossy(&version.stdout);
    assert!(
        version.status.success() && stdout.contains(env!("CARGO_PKG_VERSION")),
        "--version: {stdout}{}",
        String::from_utf8_lossy(&version.stderr)
    );
    let help = run_in(&rootfs, "65532:65532", &["--help"]);
    let help_text = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success() && help_text.contains("run"),
        "{help_text}"
    );
    assert!(
        !help_text.contains("\n  sim "),
        "the image has no embedded cluster: {help_text}"
    );
    let sim = run_in(&rootfs, "65532:65532", &["sim"]);
    assert_eq!(
        sim.status.code(),
        Some(2),
        "sim is not a subcommand of the image"
    );
    let embedded = run_in(&rootfs, "65532:65532", &["run", "--embedded"]);
    let stderr = String::from_utf8_lossy(&embedded.stderr);
    assert_eq!(embedded.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("this build has no embedded cluster"),
        "{stderr}"
    );
    assert_eq!(
        stderr.trim().lines().count(),
        1,
        "one line on stderr: {stderr}"
    );
}
