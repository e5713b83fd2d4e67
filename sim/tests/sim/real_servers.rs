//! The fixtures on real servers: the mariadb-operator fixture reconciled against a real MariaDB
//! server (`MariaDbConfig::real`), its MariaDB reachable through the Service the fixture makes
//! (ClusterIP:3306 through the service proxy), Database / User / Grant as real SQL with the cap
//! and the Secret's password, Ready=False with the server's own error, deletion dropping them;
//! and a real RabbitMQ with a user and vhost of its own, exposed as a Service. Both servers are
//! stopped by their own pids: nothing of them is left.
//!
//! Needs root (the service proxy) and the Debian mariadb-server and rabbitmq-server
//! (tests/real-cinder/setup.sh): without them it says so and passes, except under `CI=true`.

use crate::common::{alive, eventually, is_root, runs_unless_missing};
use cinder_sim::controllers::{ControllersConfig, Switch, kinds};
use cinder_sim::real_servers::{MariaDbServer, RabbitMqServer, expose};
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

fn prerequisites(test: &str) -> bool {
    let missing = if !is_root() {
        Some("the service proxy needs root")
    } else if !MariaDbServer::available() || !RabbitMqServer::available() {
        Some("mariadb-server or rabbitmq-server is not installed: run tests/real-cinder/setup.sh")
    } else {
        None
    };
    runs_unless_missing(test, missing)
}

fn api(client: &kube::Client, kind: kinds::Kind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "default", &kind.resource())
}

async fn create(client: &kube::Client, kind: kinds::Kind, body: Value) {
    let mut object: DynamicObject = serde_json::from_value(body).unwrap();
    object.types = Some(kube::core::TypeMeta {
        api_version: format!("{}/{}", kind.group, kind.version),
        kind: kind.kind.to_owned(),
    });
    api(client, kind)
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

/// The Ready condition's status, reason and message of `kind` `name`.
async fn ready(
    client: &kube::Client,
    kind: kinds::Kind,
    name: &str,
) -> Option<(String, String, String)> {
    let object = api(client, kind).get_opt(name).await.ok()??;
    let c = object
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?
        .clone();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("message")))
}

/// `mariadb -h HOST -P PORT -u USER` with the password in the environment: its output or error.
fn login(host: &str, port: u16, user: &str, password: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("/usr/bin/mariadb")
        .args([
            "--no-defaults",
            "-h",
            host,
            "-P",
            &port.to_string(),
            "-u",
            user,
            "-N",
            "-B",
            "-e",
            sql,
        ])
        .env("MYSQL_PWD", password)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_objects_are_reconciled_against_a_real_server_reached_through_its_service() {
    if !prerequisites("mariadb_objects_are_reconciled_against_a_real_server") {
        return;
    }
    let server = Arc::new(
        tokio::task::spawn_blocking(|| MariaDbServer::start(200))
            .await
            .unwrap()
            .unwrap(),
    );
    let pid = server.pid().unwrap();
    let mut config = ControllersConfig::all_off();
    config.endpoints = Switch::default();
    config.mariadb.switch = Switch::on(Duration::from_millis(10));
    config.mariadb.real = Some(Arc::clone(&server));
    let cluster = EmbeddedCluster::start(ClusterConfig {
        controllers: config,
        service_proxy: true,
        ..ClusterConfig::default()
    })
    .await
    .unwrap();
    let client = cluster.client().await;
    let password = "pa'ss$w0/rd";
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "db"}, "stringData": {"password": password}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let reference = json!({"name": "mariadb"});
    create(
        &client,
        kinds::MARIADB,
        json!({"metadata": {"name": "mariadb"}, "spec": {}}),
    )
    .await;
    create(&client, kinds::DATABASE, json!({"metadata": {"name": "cinder"}, "spec": {"mariaDbRef": reference, "name": "cinder", "characterSet": "utf8mb4", "collate": "utf8mb4_general_ci"}})).await;
    create(&client, kinds::USER, json!({"metadata": {"name": "cinder"}, "spec": {"mariaDbRef": reference, "name": "cinder", "host": "%", "maxUserConnections": 7, "passwordSecretKeyRef": {"name": "db", "key": "password"}}})).await;
    create(&client, kinds::GRANT, json!({"metadata": {"name": "cinder"}, "spec": {"mariaDbRef": reference, "privileges": ["ALL PRIVILEGES"], "database": "cinder", "table": "*", "username": "cinder", "host": "%"}})).await;
    // Refused by the server or the cluster: a user whose Secret is missing, a grant to nobody.
    create(&client, kinds::USER, json!({"metadata": {"name": "orphan"}, "spec": {"mariaDbRef": reference, "passwordSecretKeyRef": {"name": "absent", "key": "password"}}})).await;
    create(&client, kinds::GRANT, json!({"metadata": {"name": "nobody"}, "spec": {"mariaDbRef": reference, "privileges": ["SELECT"], "database": "cinder", "username": "nobody"}})).await;

    for kind in [kinds::MARIADB, kinds::DATABASE, kinds::USER, kinds::GRANT] {
        let name = if kind == kinds::MARIADB {
            "mariadb"
        } else {
            "cinder"
        };
        eventually(&format!("{} {name} Ready", kind.kind), || async {
            ready(&client, kind, name)
                .await
                .is_some_and(|r| r.0 == "True")
        })
        .await;
    }
    eventually("the orphan user refused", || async {
        ready(&client, kinds::USER, "orphan")
            .await
            .is_some_and(|(s, reason, m)| {
                s == "False" && reason == "Failed" && m.contains("Secret default/absent not found")
            })
    })
    .await;
    eventually(
        "the grant to nobody refused with the server's error",
        || async {
            ready(&client, kinds::GRANT, "nobody")
                .await
                .is_some_and(|(s, _, m)| s == "False" && m.contains("ERROR 1133"))
        },
    )
    .await;

    // What the server holds.
    assert!(
        server
            .sql("SHOW DATABASES")
            .await
            .unwrap()
            .lines()
            .any(|l| l == "cinder")
    );
    assert_eq!(
        server
            .sql("SELECT max_user_connections FROM mysql.user WHERE User = 'cinder'")
            .await
            .unwrap()
            .trim(),
        "7"
    );
    let grants = server.sql("SHOW GRANTS FOR 'cinder'@'%'").await.unwrap();
    assert!(
        grants.contains("GRANT ALL PRIVILEGES ON `cinder`.* TO `cinder`@`%`"),
        "{grants}"
    );
    let status = api(&client, kinds::USER).get("cinder").await.unwrap();
    assert!(
        !status.data.to_string().contains(password),
        "no password in the status"
    );

    // The Service the DSN names leads to the server: the user logs in with the Secret's
    // password through ClusterIP:3306, and is refused with another.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let ip = services
        .get("mariadb")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    let proxy = cluster.service_proxy().unwrap();
    let frontend: std::net::SocketAddrV4 = format!("{ip}:3306").parse().unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        proxy.wait_for(|plan| plan.frontends.contains_key(&frontend)),
    )
    .await
    .unwrap();
    let (ip2, pw) = (ip.clone(), password.to_owned());
    let who = tokio::task::spawn_blocking(move || {
        login(&ip2, 3306, "cinder", &pw, "SELECT CURRENT_USER()")
    })
    .await
    .unwrap();
    assert_eq!(who.as_deref(), Ok("cinder@%"));
    let ip2 = ip.clone();
    let refused =
        tokio::task::spawn_blocking(move || login(&ip2, 3306, "cinder", "wrong", "SELECT 1"))
            .await
            .unwrap();
    assert!(
        refused.unwrap_err().contains("1045"),
        "a wrong password is refused"
    );

    // Deletion drops what each made.
    for kind in [kinds::GRANT, kinds::USER, kinds::DATABASE] {
        api(&client, kind)
            .delete("cinder", &DeleteParams::default())
            .await
            .unwrap();
    }
    for kind in [kinds::GRANT, kinds::USER, kinds::DATABASE] {
        eventually(&format!("{} cinder gone", kind.kind), || async {
            api(&client, kind)
                .get_opt("cinder")
                .await
                .unwrap()
                .is_none()
        })
        .await;
    }
    assert!(
        !server
            .sql("SHOW DATABASES")
            .await
            .unwrap()
            .lines()
            .any(|l| l == "cinder")
    );
    assert_eq!(
        server
            .sql("SELECT COUNT(*) FROM mysql.user WHERE User = 'cinder'")
            .await
            .unwrap()
            .trim(),
        "0"
    );

    cluster.shutdown().await;
    drop(Arc::into_inner(server).expect("the cluster let go of the server"));
    assert!(!alive(pid), "mariadbd {pid} stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_rabbitmq_serves_its_user_and_vhost_behind_a_service() {
    if !prerequisites("a_real_rabbitmq_serves_its_user_and_vhost_behind_a_service") {
        return;
    }
    let broker = tokio::task::spawn_blocking(RabbitMqServer::start)
        .await
        .unwrap()
        .unwrap();
    let pid = broker.pid().unwrap();
    // This instance's processes name its own data directory; other brokers may run beside it.
    let dir = broker.dir().display().to_string();
    let broker = tokio::task::spawn_blocking(move || {
        broker.add_user("cinder", "mq$p@ss/w", "cinder").unwrap();
        // A second pass changes the password of the user that exists.
        broker.add_user("cinder", "mq$p@ss/w2", "cinder").unwrap();
        assert!(
            broker
                .ctl(&["authenticate_user", "cinder", "mq$p@ss/w2"], None)
                .is_ok()
        );
        assert!(
            broker
                .ctl(&["authenticate_user", "cinder", "mq$p@ss/w"], None)
                .is_err()
        );
        let permissions = broker
            .ctl(&["list_permissions", "-p", "cinder"], None)
            .unwrap();
        assert!(permissions.contains("cinder"), "{permissions}");
        broker
    })
    .await
    .unwrap();

    let mut config = ControllersConfig::all_off();
    config.endpoints = Switch::default();
    let cluster = EmbeddedCluster::start(ClusterConfig {
        controllers: config,
        service_proxy: true,
        ..ClusterConfig::default()
    })
    .await
    .unwrap();
    let client = cluster.client().await;
    expose(&client, "default", "rabbitmq", 5672, broker.port())
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let ip = services
        .get("rabbitmq")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap();
    let frontend: std::net::SocketAddrV4 = format!("{ip}:5672").parse().unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        cluster
            .service_proxy()
            .unwrap()
            .wait_for(|plan| plan.frontends.contains_key(&frontend)),
    )
    .await
    .unwrap();
    // The AMQP protocol header through the ClusterIP is answered with the broker's
    // Connection.Start method frame (type 1, channel 0).
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(frontend).await.unwrap();
    stream.write_all(b"AMQP\x00\x00\x09\x01").await.unwrap();
    let mut head = [0u8; 7];
    tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&head[..3], &[1, 0, 0], "a method frame on channel 0");
    drop(stream);

    cluster.shutdown().await;
    tokio::task::spawn_blocking(move || drop(broker))
        .await
        .unwrap();
    assert!(!alive(pid), "rabbitmq-server {pid} stopped");
    let left = Command::new("pgrep").args(["-f", &dir]).output().unwrap();
    assert!(
        left.stdout.is_empty(),
        "left behind: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}
