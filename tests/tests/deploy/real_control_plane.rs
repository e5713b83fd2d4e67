//! deploy/ on a real Kubernetes control plane (tests/control-plane/, built by its build.sh):
//! the API server reports v1.37.2; deploy/crds/ and the third-party CRDs of the simulator's
//! fixtures install as real CRDs; `kubectl apply --server-side -k deploy/samples` is accepted,
//! twice (a re-apply of the same manifests by the same field manager is no conflict);
//! `kubectl explain cinder.spec.api` answers from the published schema; the real
//! kube-controller-manager gives a Deployment its ReplicaSet and that one its Pods; and
//! stopping the control plane leaves none of its processes and none of its files.

use cinder_e2e::deploy_helpers::deploy_dir;
use cinder_e2e::eventually;
use cinder_e2e::observability_helpers::{on_path, run};
use cinder_e2e::real_cluster::{RealControlPlane, binary_for_test};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use std::path::Path;
use std::process::Output;

const TEST: &str = "deploy_and_samples_on_a_real_control_plane";

/// `kubectl ARGS` against `kubeconfig`, from the repository root, off the async runtime.
async fn kubectl(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    let (kubectl, kubeconfig) = (kubectl.to_path_buf(), kubeconfig.display().to_string());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&kubectl, &args, &[("KUBECONFIG", kubeconfig.as_str())])
    })
    .await
    .expect("the kubectl task runs")
    .expect("kubectl starts")
}

fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} exited {:?}:\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The pids `start` reported for its components (`start: NAME pid N rss M MiB`).
fn component_pids(report: &str) -> Vec<(String, u32)> {
    report
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("start: ")?;
            let mut words = rest.split_whitespace();
            let name = words.next()?;
            (words.next()? == "pid").then_some(())?;
            Some((name.to_string(), words.next()?.parse().ok()?))
        })
        .collect()
}

/// Whether a process `pid` exists (a zombie counts: it is not reaped).
fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_and_samples_on_a_real_control_plane() {
    let Some(bin) = binary_for_test(TEST).unwrap() else {
        return;
    };
    let Some(kubectl_bin) = on_path("kubectl") else {
        panic!("{TEST}: no kubectl on PATH (.ci/run installs kubernetes-client)");
    };
    let plane = RealControlPlane::start(&bin).await.unwrap();
    println!(
        "{TEST}: control plane ready in {:.1} s\n{}",
        plane.started_in().as_secs_f64(),
        plane.start_report()
    );
    let kubeconfig = plane.kubeconfig_path().to_path_buf();
    let client = plane.client().await.unwrap();

    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, "v1.37.2");

    // The project's CRDs exactly as deploy/crds/ ships them, and the third-party ones.
    let crds = deploy_dir().join("crds").display().to_string();
    let out = kubectl(
        &kubectl_bin,
        &kubeconfig,
        &["apply", "--server-side", "-k", &crds],
    )
    .await;
    assert_success("kubectl apply --server-side -k deploy/crds", &out);
    cinder_sim::controllers::install_fixtures(client.clone())
        .await
        .unwrap();
    let cinders = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cinder.openstack.c5c3.io", "v1alpha1", "Cinder"),
        "cinders",
    );
    let cinder_api: Api<DynamicObject> = Api::all_with(client.clone(), &cinders);
    eventually("Cinders are served", || {
        let api = cinder_api.clone();
        async move { api.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await
    .unwrap();

    let samples = deploy_dir().join("samples").display().to_string();
    for round in ["first", "second"] {
        let out = kubectl(
            &kubectl_bin,
            &kubeconfig,
            &[
                "apply",
                "--server-side",
                "--field-manager=cinder-e2e",
                "-k",
                &samples,
            ],
        )
        .await;
        assert_success(
            &format!("the {round} kubectl apply --server-side -k deploy/samples"),
            &out,
        );
    }
    let cinder = Api::<DynamicObject>::namespaced_with(client.clone(), "openstack", &cinders)
        .get("cinder")
        .await
        .unwrap();
    assert_eq!(cinder.data["spec"]["openStackRelease"], "2026.1");

    let out = kubectl(&kubectl_bin, &kubeconfig, &["explain", "cinder.spec.api"]).await;
    assert_success("kubectl explain cinder.spec.api", &out);
    let explained = String::from_utf8_lossy(&out.stdout);
    for expected in ["The cinder-api Deployment.", "replicas", "uwsgi"] {
        assert!(
            explained.contains(expected),
            "kubectl explain cinder.spec.api lacks {expected:?}:\n{explained}"
        );
    }

    // kube-controller-manager's deployment and replicaset controllers.
    let ns = "real-control-plane";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1"}]}
            }
        }
    }))
    .unwrap();
    let created = Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    let rs = eventually("the Deployment's ReplicaSet", || {
        let (api, uid) = (replica_sets.clone(), uid.clone());
        async move {
            let list = api.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|rs| {
                rs.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid && o.controller == Some(true))
            })
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; logs in {}", plane.log_dir().display()));
    let rs_uid = rs.metadata.uid.clone().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually("the ReplicaSet's two Pods", || {
        let (api, rs_uid) = (pods.clone(), rs_uid.clone());
        async move {
            let list = api.list(&ListParams::default()).await.ok()?;
            let owned = list
                .items
                .iter()
                .filter(|p| {
                    p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|o| o.uid == rs_uid)
                })
                .count();
            (owned == 2).then_some(())
        }
    })
    .await
    .unwrap();

    // Stopping leaves nothing: no component process and no temporary directory of `start`.
    let pids = component_pids(&plane.start_report());
    let names: Vec<&str> = pids.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler"
        ]
    );
    let start_pid = plane.pid();
    let start_dir = plane
        .start_dir()
        .expect("start names its temporary directory");
    assert!(start_dir.join("etcd").is_dir(), "{}", start_dir.display());
    drop(plane);
    for (name, pid) in &pids {
        assert!(!process_exists(*pid), "{name} (pid {pid}) outlived stop");
    }
    assert!(!process_exists(start_pid), "start outlived stop");
    assert!(!start_dir.exists(), "{} outlived stop", start_dir.display());
}
