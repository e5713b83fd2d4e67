//! kubectl and a Service's endpoints: `get endpointslices` (AddressType, Ports, Endpoints),
//! `get endpoints` and `describe service` (Endpoints) follow the pods the Service selects.
//! Skipped (with a printed reason) when no kubectl is on PATH.

use std::time::Duration;

use cinder_sim::controllers::{ControllersConfig, Switch};

use crate::tools::{cluster_with_controllers_and_kubectl, write};

const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "web:1", ports: [{name: http, containerPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
"#;

fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[tokio::test]
async fn kubectl_shows_the_endpoints_of_a_service() {
    let mut controllers = ControllersConfig::default();
    controllers.nodes.count = 2;
    controllers.pods = Switch::on(Duration::from_millis(20));
    controllers.deployments.switch = Switch::on(Duration::from_millis(20));
    let Some((cluster, k, dir)) = cluster_with_controllers_and_kubectl(controllers).await else {
        return;
    };
    let web = write(dir.path(), "web.yaml", WEB);
    k.ok(&["apply", "-f", &web]).await;
    k.ok(&["rollout", "status", "deployment/web", "--timeout=60s"])
        .await;
    let ips: Vec<String> = k
        .ok(&[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].status.podIP}",
        ])
        .await
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(ips.len(), 2, "{ips:?}");
    let mut slices = Vec::new();
    for _ in 0..100 {
        slices = rows(
            &k.ok(&[
                "get",
                "endpointslices",
                "-l",
                "kubernetes.io/service-name=web",
            ])
            .await,
        );
        if slices.len() == 2 && ips.iter().all(|ip| slices[1][3].contains(ip.as_str())) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        slices[0],
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    );
    assert!(slices[1][0].starts_with("web-"), "{slices:?}");
    assert_eq!(slices[1][1..3], ["IPv4", "8080"], "{slices:?}");
    assert!(
        ips.iter().all(|ip| slices[1][3].contains(ip.as_str())),
        "{slices:?}"
    );

    let endpoints = rows(&k.ok(&["get", "endpoints", "web"]).await);
    assert_eq!(endpoints[0], ["NAME", "ENDPOINTS", "AGE"]);
    for ip in &ips {
        assert!(
            endpoints[1][1].contains(&format!("{ip}:8080")),
            "{endpoints:?}"
        );
    }
    let described = k.ok(&["describe", "service", "web"]).await;
    assert!(described.contains("Endpoints:"), "{described}");
    for ip in &ips {
        assert!(described.contains(&format!("{ip}:8080")), "{described}");
    }
    cluster.shutdown().await;
}
