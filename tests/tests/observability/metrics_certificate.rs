//! The HTTPS metrics endpoint's certificate, through the operator binary: started with
//! `--metrics-secure` and an empty `--metrics-cert-dir` (the optional Secret not created yet) it
//! serves a certificate generated at start-up; once a `tls.crt` / `tls.key` pair appears in the
//! folder that pair is served, and when the pair is replaced the new one is, without a restart.
//! A certificate counts as served when a TLS client that trusts only it completes a handshake.
//! A scrape whose TokenReview the API server does not answer is refused with 503 (never let in).

use anyhow::Context as _;
use cinder_e2e::deploy_helpers::https_get;
use cinder_e2e::observability_helpers::test_telemetry;
use cinder_e2e::operator_process::OperatorProcess;
use cinder_e2e::*;
use cinder_sim::EmbeddedCluster;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a changed pair may take to be served: the files are compared every 10 s.
const RELOAD_PATIENCE: Duration = Duration::from_secs(60);

/// Writes a new self-signed pair for `localhost` into `dir`; answers the certificate's PEM.
fn write_pair(dir: &Path) -> anyhow::Result<String> {
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])?;
    let pem = generated.cert.pem();
    // The key first, then the certificate: a reload between the two writes sees a mismatched
    // pair, is refused, and the next one sees both.
    std::fs::write(dir.join("tls.key"), generated.signing_key.serialize_pem())?;
    std::fs::write(dir.join("tls.crt"), &pem)?;
    Ok(pem)
}

/// Whether `addr` completes a TLS handshake for `localhost` with a client trusting only the
/// certificate `pem`.
fn serves(addr: SocketAddr, pem: &str) -> anyhow::Result<bool> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from("localhost")?;
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name)?;
    let mut socket = TcpStream::connect(addr)?;
    socket.set_read_timeout(Some(Duration::from_secs(10)))?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut socket) {
            return match e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                Some(rustls::Error::InvalidCertificate(_)) => Ok(false),
                _ => Err(e).context("TLS handshake"),
            };
        }
    }
    Ok(true)
}

/// Waits (up to [`RELOAD_PATIENCE`]) until `addr` serves the certificate `pem` (a failed
/// handshake is retried: a reload may catch the pair half written).
async fn until_served(addr: SocketAddr, pem: &str, what: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + RELOAD_PATIENCE;
    loop {
        let pem_owned = pem.to_string();
        let last = match tokio::task::spawn_blocking(move || serves(addr, &pem_owned)).await? {
            Ok(true) => return Ok(()),
            Ok(false) => "another certificate".to_string(),
            Err(e) => format!("{e:#}"),
        };
        anyhow::ensure!(
            Instant::now() < deadline,
            "{what} was not served within {RELOAD_PATIENCE:?} (last: {last})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Starts `cinder-operator run --metrics-secure --metrics-cert-dir <certs>` against the cluster
/// of `kubeconfig` and waits (up to 120 s) for the metrics address it prints.
async fn start_operator(
    kubeconfig: &Path,
    certs: &Path,
    logs: &Path,
) -> anyhow::Result<(OperatorProcess, SocketAddr)> {
    let certs = certs.display().to_string();
    let mut operator = OperatorProcess::start_with(
        kubeconfig,
        "cert-test",
        NS,
        15,
        logs,
        &["--metrics-secure", "--metrics-cert-dir", &certs],
    )?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(addr) = operator.metrics_address() {
            return Ok((operator, addr));
        }
        if let Some(status) = operator.exited() {
            anyhow::bail!("the operator exited ({status}): {}", operator.log_tail(5));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the operator printed no metrics address within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_certificate_is_generated_then_reloaded_when_it_changes() {
    use cinder_sim::faults::ErrorRule;
    test_telemetry();
    let logs = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let mut config = HarnessConfig::default().cluster;
    config.kubeconfig_path = Some(logs.path().join("kubeconfig"));
    let cluster = EmbeddedCluster::start(config).await.unwrap();
    let client = cluster.client().await;
    install_crds(&client).await.unwrap();
    create_namespace(&client, NS).await.unwrap();
    let kubeconfig = cluster.kubeconfig_path().to_path_buf();
    let (operator, addr) = start_operator(&kubeconfig, certs.path(), logs.path())
        .await
        .unwrap();

    // Nothing mounted: a generated certificate, HTTPS, reviews on.
    let (code, body) = https_get(&addr.to_string(), "/metrics", None)
        .await
        .unwrap();
    assert_eq!(code, 401, "{body}");

    let first = write_pair(certs.path()).unwrap();
    until_served(addr, &first, "the first mounted pair")
        .await
        .unwrap();
    let second = write_pair(certs.path()).unwrap();
    until_served(addr, &second, "the replaced pair")
        .await
        .unwrap();
    assert!(
        !serves(addr, &first).unwrap(),
        "the first pair is still served after the replacement"
    );

    // The API server fails the reviews: the scrape is refused, not admitted.
    cluster
        .faults()
        .add_error_rule(ErrorRule::always(Some("create"), Some("tokenreviews"), 500));
    let (code, body) = https_get(&addr.to_string(), "/metrics", Some("some-token"))
        .await
        .unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(!body.contains("some-token"), "{body}");
    drop(operator);
    cluster.shutdown().await;
}
