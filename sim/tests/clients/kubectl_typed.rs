//! kubectl's typed commands, which send protobuf bodies for built-in kinds: every `kubectl
//! create` subcommand a newcomer types first (namespace, configmap, secret generic, deployment,
//! service clusterip, job, cronjob, serviceaccount, role, rolebinding), then get, patch and
//! delete of what they made; `kubectl explain` of a built-in and of a CRD (down to a nested
//! field's description); `kubectl get` by the CRDs' category and short name with their printer
//! columns; `kubectl apply` of a kind whose CRD is missing, refused as a real cluster refuses it.

use crate::tools::{cluster_and_kubectl, write};

#[tokio::test]
async fn typed_creates_then_get_patch_delete() {
    let Some((c, k, _dir)) = cluster_and_kubectl().await else {
        return;
    };
    k.ok(&["create", "namespace", "demo"]).await;
    let n = ["-n", "demo"];
    let creates: Vec<Vec<&str>> = vec![
        vec![
            "create",
            "configmap",
            "settings",
            "--from-literal=color=blue",
        ],
        vec![
            "create",
            "secret",
            "generic",
            "creds",
            "--from-literal=password=s3cret",
        ],
        vec![
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2",
            "--port=80",
        ],
        vec!["create", "service", "clusterip", "web", "--tcp=80:8080"],
        vec![
            "create",
            "job",
            "once",
            "--image=busybox:1.36",
            "--",
            "true",
        ],
        vec![
            "create",
            "cronjob",
            "nightly",
            "--image=busybox:1.36",
            "--schedule=0 3 * * *",
            "--",
            "true",
        ],
        vec!["create", "serviceaccount", "robot"],
        vec![
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=configmaps",
        ],
        vec![
            "create",
            "rolebinding",
            "robot-reads",
            "--role=reader",
            "--serviceaccount=demo:robot",
        ],
    ];
    for args in &creates {
        let out = k.run(&[&n[..], args].concat()).await;
        assert!(out.ok, "kubectl {args:?}: {}", out.stderr);
        assert!(
            out.stdout.contains("created"),
            "kubectl {args:?}: {}",
            out.stdout
        );
    }

    let store = c.store();
    assert!(store.get("", "namespaces", "", "demo").is_some());
    let cm = store.get("", "configmaps", "demo", "settings").unwrap();
    assert_eq!(cm["data"]["color"], "blue");
    let secret = store.get("", "secrets", "demo", "creds").unwrap();
    assert_eq!(secret["data"]["password"], "czNjcmV0");
    let deploy = store.get("apps", "deployments", "demo", "web").unwrap();
    assert_eq!(deploy["spec"]["replicas"], 2);
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        80
    );
    let svc = store.get("", "services", "demo", "web").unwrap();
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    let job = store.get("batch", "jobs", "demo", "once").unwrap();
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
    let cron = store.get("batch", "cronjobs", "demo", "nightly").unwrap();
    assert_eq!(cron["spec"]["schedule"], "0 3 * * *");
    let role = store
        .get("rbac.authorization.k8s.io", "roles", "demo", "reader")
        .unwrap();
    assert_eq!(role["rules"][0]["resources"][0], "configmaps");
    let binding = store
        .get(
            "rbac.authorization.k8s.io",
            "rolebindings",
            "demo",
            "robot-reads",
        )
        .unwrap();
    assert_eq!(binding["subjects"][0]["name"], "robot");
    assert!(store.get("", "serviceaccounts", "demo", "robot").is_some());

    let names = k
        .ok(&[
            "get",
            "-n",
            "demo",
            "configmap,secret,deployment,service,job,cronjob,serviceaccount,role,rolebinding",
            "-o",
            "name",
        ])
        .await;
    for expected in [
        "configmap/settings",
        "secret/creds",
        "deployment.apps/web",
        "service/web",
        "job.batch/once",
        "cronjob.batch/nightly",
        "serviceaccount/robot",
        "role.rbac.authorization.k8s.io/reader",
        "rolebinding.rbac.authorization.k8s.io/robot-reads",
    ] {
        assert!(
            names.lines().any(|l| l == expected),
            "{expected} in {names}"
        );
    }

    k.ok(&[
        "patch",
        "-n",
        "demo",
        "configmap",
        "settings",
        "-p",
        r#"{"data":{"color":"red"}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "-n",
        "demo",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ])
    .await;
    k.ok(&["label", "-n", "demo", "secret", "creds", "tier=backend"])
        .await;
    assert_eq!(
        k.ok(&[
            "get",
            "-n",
            "demo",
            "configmap",
            "settings",
            "-o",
            "jsonpath={.data.color}"
        ])
        .await,
        "red"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "-n",
            "demo",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}"
        ])
        .await,
        "3"
    );
    assert_eq!(
        store.get("", "secrets", "demo", "creds").unwrap()["metadata"]["labels"]["tier"],
        "backend"
    );

    for kind in [
        "configmap/settings",
        "secret/creds",
        "deployment/web",
        "service/web",
        "job/once",
        "cronjob/nightly",
        "serviceaccount/robot",
        "role/reader",
        "rolebinding/robot-reads",
    ] {
        let out = k.run(&["delete", "-n", "demo", kind, "--wait=false"]).await;
        assert!(
            out.ok && out.stdout.contains("deleted"),
            "delete {kind}: {}",
            out.stderr
        );
    }
    assert!(store.get("", "configmaps", "demo", "settings").is_none());
    assert!(
        store
            .get(
                "rbac.authorization.k8s.io",
                "rolebindings",
                "demo",
                "robot-reads"
            )
            .is_none()
    );
    c.shutdown().await;
}

#[tokio::test]
async fn explain_and_a_missing_crd() {
    let Some((c, k, dir)) = cluster_and_kubectl().await else {
        return;
    };
    let crds = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/crds");
    // without the CRDs: refused as a real cluster refuses it
    let cinder = write(
        dir.path(),
        "cinder.yaml",
        "apiVersion: cinder.openstack.c5c3.io/v1alpha1\nkind: Cinder\nmetadata: {name: demo}\nspec: {}\n",
    );
    let missing = k.run(&["apply", "-f", &cinder]).await;
    assert!(!missing.ok);
    assert!(
        missing.stderr.contains(
            "no matches for kind \"Cinder\" in version \"cinder.openstack.c5c3.io/v1alpha1\""
        ) && missing.stderr.contains("ensure CRDs are installed first"),
        "{}",
        missing.stderr
    );

    let template = k.ok(&["explain", "deployment.spec.template"]).await;
    assert!(template.contains("PodTemplateSpec"), "{template}");
    assert!(template.contains("metadata"), "{template}");
    assert!(template.contains("spec"), "{template}");

    k.ok(&["apply", "-k", crds]).await;
    let spec = k.ok(&["explain", "cinder.spec"]).await;
    assert!(spec.contains("openStackRelease"), "{spec}");
    assert!(spec.contains("FIELDS"), "{spec}");
    // A nested field carries the description of its Rust doc comment.
    let processes = k.ok(&["explain", "cinder.spec.api.uwsgi.processes"]).await;
    assert!(
        processes.contains("Worker processes per pod"),
        "{processes}"
    );
    let conditions = k.ok(&["explain", "cinderbackend.status.conditions"]).await;
    assert!(conditions.contains("one per type"), "{conditions}");
    // The categories and short names find the kinds; the Reason column is shown. (kubectl
    // expands a category from its discovery cache, which `api-resources` refreshes.)
    let in_category = k.ok(&["api-resources", "--categories", "openstack"]).await;
    for kind in ["Cinder", "CinderBackend", "CinderBackupBackend"] {
        assert!(in_category.contains(kind), "{kind}: {in_category}");
    }
    let all = k.run(&["get", "openstack", "-A"]).await;
    assert!(
        all.ok && all.stderr.contains("No resources found"),
        "{}",
        all.stderr
    );
    k.ok(&["create", "namespace", "demo"]).await;
    k.ok(&["apply", "-n", "demo", "-f", &write(
        dir.path(),
        "backend.yaml",
        "apiVersion: cinder.openstack.c5c3.io/v1alpha1\nkind: CinderBackend\nmetadata: {name: nfs1}\nspec: {cinderRef: {name: demo}, type: NFS, nfs: {server: nfs.example, path: /export}}\n",
    )])
    .await;
    let listed = k.ok(&["get", "openstack", "-n", "demo"]).await;
    assert!(listed.contains("nfs1"), "{listed}");
    let wide = k.ok(&["get", "cdrbe", "-n", "demo"]).await;
    for column in ["READY", "REASON", "TYPE", "CINDER", "AGE"] {
        assert!(wide.contains(column), "{column}: {wide}");
    }
    c.shutdown().await;
}
