//! deploy/crds/ must be exactly what `cinder-operator crdgen --out-dir deploy/crds` writes.

use cinder_operator::cmd_crdgen::{REGENERATE_COMMAND, files, yaml_stream};
use std::path::PathBuf;

fn deploy_crds() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("deploy")
        .join("crds")
}

#[test]
fn deploy_crds_match_the_generated_yaml() {
    let dir = deploy_crds();
    for (name, expected) in files().unwrap() {
        let path = dir.join(&name);
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == expected,
            "{} differs from the generated CRD; regenerate with `{REGENERATE_COMMAND}` (from the workspace root)",
            path.display()
        );
    }
}

#[test]
fn stream_has_three_crds_of_the_group() {
    let stream = yaml_stream().unwrap();
    let docs: Vec<serde_norway::Value> = serde_norway::Deserializer::from_str(&stream)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let names: Vec<_> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "cinders.cinder.openstack.c5c3.io",
            "cinderbackends.cinder.openstack.c5c3.io",
            "cinderbackupbackends.cinder.openstack.c5c3.io"
        ]
    );
    for d in &docs {
        assert_eq!(d["kind"], "CustomResourceDefinition");
        assert_eq!(d["spec"]["versions"][0]["name"], "v1alpha1");
    }
}
