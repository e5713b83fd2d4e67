//! The `cinder-operator run` subcommand: connects to a cluster (kubeconfig / in-cluster, or an
//! embedded cluster it starts, bootstraps with the CRDs and `deploy/samples/`, and follows), checks
//! that every watched kind is served and listable ([`crate::preflight`]), builds the operator
//! context, serves the metrics / probe / admin endpoints, runs the controllers, and
//! on SIGTERM or Ctrl-C stops new passes, drains in-flight transactions through the coordinator's
//! root write lock, stops the embedded cluster and exits 0. Failures exit 1 with one line on
//! stderr.
//!
//! With `--leader-elect` the endpoints start at once, a [`LeaderElector`] campaigns for the Lease
//! `cinder-operator-leader` in the lease namespace, and the controllers start only once this
//! replica leads ([`run_when_leader`]). A standby is ready (`/readyz` 200, controller-runtime's
//! convention: readiness says the process can serve, so a rolling update of the operator's own
//! Deployment completes) and reconciles nothing; leadership shows in the gauge
//! `cinder_operator_leader` and in an info line on every change ([`follow_leadership`]). A leader that loses
//! its Lease stops its controllers and the process exits 1 with one line on stderr (the Deployment
//! restarts the pod, which campaigns again), as controller-runtime does. On SIGTERM the leader
//! drains, then releases the Lease so a successor takes over at once. `--lease-duration` sets the
//! duration of the leader Lease, of the shard Leases and of the device Leases.
//!
//! With `--shards S` the replica starts a [`ShardHolderHandle`] (see [`crate::shards`]) before the
//! controllers, which then reconcile only the Cinders of the shards it holds; on SIGTERM it
//! drains, then gives its shards back.

use crate::cli::RunArgs;
use crate::context::{OperatorContext, OperatorOptions};
use crate::crd::{Cinder, CinderBackend};
use crate::embedded;
use crate::http::access::{self, AccessReviewer};
use crate::http::tls::{self, ServingCert};
use crate::http::{
    AdminSources, Binds, Endpoints, Inventory, InventorySource, MetricsEndpoint, PipelinesSource,
    Readiness, Security,
};
use crate::kube_client::{ClientLimits, throttled, throttled_from_kubeconfig};
use crate::metrics::Metrics;
use crate::shards::{ShardHolderConfig, ShardHolderHandle, ShardMetrics};
use anyhow::Context as _;
use cinder_lease::{HolderIdentity, LEADER_LEASE_NAME, LeaderElector, LeaderHandle, LeaseSettings};
#[cfg(feature = "embedded")]
use cinder_sim::{ClusterConfig, EmbeddedCluster};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// How long the reachability check of a non-embedded API server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the controllers get to finish their in-flight passes on shutdown.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How often `--embedded` looks at the samples.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// `--embedded` reports where it is stuck after this long without a change.
const STUCK_AFTER: Duration = Duration::from_secs(60);

/// Runs the subcommand.
pub fn run(args: &RunArgs) -> ExitCode {
    let runtime = match crate::cli::async_runtime("run") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    // Logs go to stderr (stdout carries the bootstrap's output); the OTLP exporter needs the
    // runtime.
    let telemetry = {
        let _inside = runtime.enter();
        match crate::telemetry::init(&args.telemetry()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("cinder-operator run: {}", error_line(&e));
                return ExitCode::from(1);
            }
        }
    };
    let result = runtime.block_on(serve(args));
    {
        let _inside = runtime.enter();
        telemetry.shutdown();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cinder-operator run: {}", error_line(&e));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes on one line, skipping a cause whose text an outer message already
/// carries (kube and io errors often repeat their source).
pub(crate) fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// The default `--kubeconfig-out`: in the system temporary directory, the same path every run.
#[cfg(feature = "embedded")]
fn default_kubeconfig_out() -> std::path::PathBuf {
    std::env::temp_dir().join("cinder-operator-embedded.kubeconfig")
}

/// The namespace of the operator's Leases: `--namespace`, else `POD_NAMESPACE`, else `default`.
fn lease_namespace(args: &RunArgs) -> String {
    args.namespace
        .clone()
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "default".to_string())
}

/// A client from the kubeconfig or the in-cluster config, checked by asking for the version.
async fn connect(limits: ClientLimits) -> anyhow::Result<kube::Client> {
    let config = kube::Config::infer().await.context(
        "cannot load a Kubernetes configuration (KUBECONFIG, ~/.kube/config or in-cluster)",
    )?;
    let client = throttled(config, limits).context("cannot build a Kubernetes client")?;
    match tokio::time::timeout(CONNECT_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => Err(anyhow::anyhow!(
            "cannot reach the Kubernetes API server: {e}"
        )),
        Err(_) => Err(anyhow::anyhow!(
            "cannot reach the Kubernetes API server: no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        )),
    }
}

/// `http://host:port` for printing (an unspecified address is shown as 127.0.0.1).
fn url(addr: SocketAddr) -> String {
    let mut shown = addr;
    if shown.ip().is_unspecified() {
        shown.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    format!("http://{shown}")
}

async fn serve(args: &RunArgs) -> anyhow::Result<()> {
    // Listen for SIGTERM / Ctrl-C from the start, so a signal during the bootstrap still ends in
    // the orderly shutdown below.
    let (signalled_tx, signalled) = tokio::sync::watch::channel(false);
    let signal_task = tokio::spawn(async move {
        crate::cli::wait_for_signal().await;
        let _ = signalled_tx.send(true);
    });
    let result = serve_until(args, signalled).await;
    signal_task.abort();
    result
}

async fn serve_until(
    args: &RunArgs,
    signalled: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    refuse_embedded_without_it(args)?;
    // Read the samples first: a broken manifest fails before anything starts.
    let mut samples = if args.embedded {
        Some(embedded::read_bootstrap(&args.samples)?)
    } else {
        None
    };
    let (cluster, real) = start_embedded(args, samples.as_deref_mut()).await?;
    let result = serve_on(args, cluster.as_ref(), samples.as_deref(), signalled).await;
    if let Some(cluster) = cluster {
        cluster.shutdown().await;
    }
    if let Some(real) = real {
        real.stop().await;
    }
    result
}

/// The servers behind `--real-cinder` (none in a build without the embedded cluster).
#[cfg(feature = "embedded")]
type RealServers = crate::embedded_real::RealServers;
#[cfg(not(feature = "embedded"))]
enum RealServers {}
#[cfg(not(feature = "embedded"))]
impl RealServers {
    async fn stop(self) {
        match self {}
    }
}

/// With `--embedded`: the embedded cluster, started with its kubeconfig written, and with
/// `--real-cinder` the real servers behind it.
#[cfg(feature = "embedded")]
async fn start_embedded(
    args: &RunArgs,
    samples: Option<&mut [embedded::Manifest]>,
) -> anyhow::Result<(Option<EmbeddedCluster>, Option<RealServers>)> {
    let real = if args.real_cinder {
        println!("starting a real MariaDB and RabbitMQ (--real-cinder) ...");
        Some(RealServers::start(samples.as_deref().unwrap_or_default()).await?)
    } else {
        None
    };
    let cluster = if args.embedded {
        let kubeconfig = args
            .kubeconfig_out
            .clone()
            .unwrap_or_else(default_kubeconfig_out);
        let authorization = if args.as_service_account.is_some() {
            cinder_sim::auth::AuthorizationMode::Rbac
        } else {
            cinder_sim::auth::AuthorizationMode::AlwaysAllow
        };
        let mut config = ClusterConfig {
            port: args.sim_port,
            kubeconfig_path: Some(kubeconfig),
            authorization,
            ..ClusterConfig::default()
        };
        if let Some(real) = &real {
            real.configure(&mut config);
        }
        Some(
            EmbeddedCluster::start(config)
                .await
                .context("cannot start the embedded cluster")?,
        )
    } else {
        None
    };
    let real = match (real, &cluster) {
        (Some(real), Some(cluster)) => {
            let client = cluster.client().await;
            let mut real = real
                .serve_broker(&client, samples.as_deref().unwrap_or_default())
                .await?;
            real.serve_keystone(&client, samples.unwrap_or_default())
                .await?;
            Some(real)
        }
        (real, _) => real,
    };
    Ok((cluster, real))
}

/// A build without the `embedded` feature refuses `--embedded` before anything starts.
fn refuse_embedded_without_it(args: &RunArgs) -> anyhow::Result<()> {
    if args.embedded && !cfg!(feature = "embedded") {
        anyhow::bail!(
            "--embedded: this build has no embedded cluster (built without the `embedded` feature); run it against a cluster, or use a default build"
        );
    }
    Ok(())
}

/// A build without the embedded cluster starts none (`--embedded` was refused before).
#[cfg(not(feature = "embedded"))]
async fn start_embedded(
    _args: &RunArgs,
    _samples: Option<&mut [embedded::Manifest]>,
) -> anyhow::Result<(Option<EmbeddedCluster>, Option<RealServers>)> {
    Ok((None, None))
}

/// The embedded cluster in a build without it: a type with no value, so every use of one is
/// unreachable and the simulator is not linked.
#[cfg(not(feature = "embedded"))]
enum EmbeddedCluster {}

#[cfg(not(feature = "embedded"))]
impl EmbeddedCluster {
    fn kubeconfig_yaml(&self) -> String {
        match *self {}
    }
    fn kubeconfig_path(&self) -> &std::path::Path {
        match *self {}
    }
    fn url(&self) -> String {
        match *self {}
    }
    async fn shutdown(self) {
        match self {}
    }
}

async fn serve_on(
    args: &RunArgs,
    cluster: Option<&EmbeddedCluster>,
    samples: Option<&[embedded::Manifest]>,
    signalled: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let admin_client = match cluster {
        Some(c) => throttled_from_kubeconfig(&c.kubeconfig_yaml(), args.client_limits())
            .await
            .map_err(|e| anyhow::anyhow!("cannot build a client of the embedded cluster: {e}"))?,
        None => connect(args.client_limits()).await?,
    };
    let mut client = admin_client.clone();
    if let (Some(cluster), Some(samples)) = (cluster, samples) {
        bootstrap_embedded(args, cluster, samples, &admin_client).await?;
        if let Some((namespace, name)) = &args.as_service_account {
            client = embedded::service_account_client(
                &admin_client,
                &cluster.url(),
                &args.rbac_manifests,
                namespace,
                name,
            )
            .await?;
            println!(
                "the operator runs as the ServiceAccount {namespace}/{name} (RBAC enforced, rules from {})",
                args.rbac_manifests.display()
            );
        }
    }
    let client = client;
    crate::preflight::check(
        &client,
        &crate::preflight::watched_kinds(args.namespace.as_deref()),
    )
    .await
    .map_err(anyhow::Error::msg)?;
    let (registry, ctx, leader, shards) = build_context(args, &client).await?;
    let leader = leader.map(|(elector, gauge)| {
        let handle = elector.start();
        tokio::spawn(follow_leadership(
            handle.subscribe(),
            gauge,
            handle.lock().identity().to_string(),
        ));
        handle
    });
    let endpoints = start_endpoints(args, registry, &ctx, leader.as_ref())?;
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let mut operator = spawn_controllers(&ctx, leader.as_ref(), shutdown_rx);
    let progress = samples.map(|samples| follow_samples(&admin_client, samples));
    let outcome = wait_for_end(signalled, &mut operator).await;
    if let Some(p) = progress {
        p.abort();
    }
    let _ = shutdown_tx.send(true);
    let drained = drain(&ctx, &mut operator).await;
    // Only after the drain: a successor must not reconcile while this replica still does.
    if let Some(leader) = leader {
        release_leadership(leader).await;
    }
    if let Some(shards) = shards {
        give_shards_back(shards).await;
    }
    endpoints.stop().await;
    if outcome.is_ok() {
        println!("stopped");
    }
    // The root write lock is held until here: no transaction starts after the drain.
    drop(drained);
    outcome
}

/// Installs the CRDs and the samples on the embedded cluster and says how to reach it.
async fn bootstrap_embedded(
    args: &RunArgs,
    cluster: &EmbeddedCluster,
    samples: &[embedded::Manifest],
    client: &kube::Client,
) -> anyhow::Result<()> {
    embedded::install_crds(client).await?;
    embedded::apply(client, samples).await?;
    println!("export KUBECONFIG={}", cluster.kubeconfig_path().display());
    println!("embedded cluster (simulator): {}", cluster.url());
    println!(
        "installed the CRDs and {} objects: {} and the embedded cluster's fixtures (sim/fixtures/run-embedded)",
        samples.len(),
        args.samples.display()
    );
    if args.real_cinder {
        println!(
            "real Cinder (--real-cinder): once Ready, the API answers on its Service from this host: \
             curl http://$(kubectl -n openstack get svc cinder-api -o jsonpath='{{.spec.clusterIP}}'):8776/ \
             (the version list and /healthcheck need no token; the rest needs a token of the sample's Keystone: with tests/real-cinder/keystone-setup.sh run, a real one runs here and the `openstack` command is printed once the API is in its catalog)"
        );
    }
    Ok(())
}

/// What [`build_context`] starts: the metrics registry, the context, the leader elector
/// (`--leader-elect`) and the shard holder (`--shards`).
type Built = (
    Registry,
    Arc<OperatorContext>,
    Option<(LeaderElector, Gauge)>,
    Option<ShardHolderHandle>,
);

/// The metrics registry (every family registered, labelled series at zero), the operator
/// context, the leader elector and its `cinder_operator_leader` gauge when `--leader-elect` asks
/// for one, and the shard holder (already
/// taking its shards) when `--shards` does.
async fn build_context(args: &RunArgs, client: &kube::Client) -> anyhow::Result<Built> {
    let (mut registry, metrics) = Metrics::new_registry();
    let device_lock_metrics = crate::metrics::device_lock_metrics(&metrics);
    device_lock_metrics.register(&mut registry);
    crate::metrics::zero_device_lock_series(&device_lock_metrics);
    let lease_duration = Duration::from_secs(args.lease_duration);
    let shards = match args.shards {
        Some(count) => {
            let metrics = ShardMetrics::default();
            metrics.register(&mut registry);
            let holder = ShardHolderHandle::start(ShardHolderConfig {
                client: client.clone(),
                namespace: lease_namespace(args),
                count,
                identity: HolderIdentity::process(),
                settings: LeaseSettings::with_duration(lease_duration),
                metrics,
            })
            .context("cannot start holding shards")?;
            Some(holder)
        }
        None => None,
    };
    let options = OperatorOptions {
        namespace: args.namespace.clone(),
        lease_namespace: lease_namespace(args),
        device_lock_metrics,
        lease_duration,
        lock_arbiters: args.lock_arbiters,
        concurrency: args.max_concurrent_reconciles,
        target_client_limits: Some(args.client_limits()),
        health_check: args.health_check_route(),
        watch_selection: if args.unselected_watches {
            crate::context::WatchSelection::Everything
        } else {
            crate::context::WatchSelection::Labelled
        },
        shards: shards
            .as_ref()
            .map_or_else(crate::shards::ShardView::all, ShardHolderHandle::view),
        ..OperatorOptions::default()
    };
    let leader = if args.leader_elect {
        let elector = LeaderElector::new(
            client.clone(),
            &options.lease_namespace,
            HolderIdentity::process(),
            &LeaseSettings::with_duration(lease_duration),
        )
        .context("cannot start leader election")?;
        Some((
            elector,
            crate::metrics::register_leader_gauge(&mut registry),
        ))
    } else {
        None
    };
    let ctx = OperatorContext::new(client.clone(), options, Arc::new(metrics))
        .await
        .context("cannot start the operator")?;
    Ok((registry, ctx, leader, shards))
}

/// Binds the metrics, probe and admin endpoints and prints where they are.
fn start_endpoints(
    args: &RunArgs,
    registry: Registry,
    ctx: &Arc<OperatorContext>,
    leader: Option<&LeaderHandle>,
) -> anyhow::Result<Endpoints> {
    let binds = Binds {
        metrics: args.metrics_bind.clone(),
        probes: args.probe_bind.clone(),
        admin: args.admin_bind.clone(),
    };
    let endpoints = Endpoints::start_secured(
        &binds,
        &security(args, ctx)?,
        MetricsEndpoint::new(registry, ctx.metrics.clone(), Some(ctx.coordinator.clone())),
        leader_readiness(ctx, leader.map(LeaderHandle::subscribe)),
        admin_sources(ctx),
    )?;
    let metrics_url = url(endpoints.metrics_addr);
    if args.metrics_secure {
        println!(
            "metrics: {}/metrics (HTTPS; bearer token allowed `get` on /metrics)",
            metrics_url.replacen("http://", "https://", 1)
        );
    } else {
        println!("metrics: {metrics_url}/metrics");
    }
    println!(
        "probes:  {0}/healthz {0}/readyz",
        url(endpoints.probes_addr)
    );
    println!(
        "admin:   {0}/ (HTML) {0}/actors {0}/transactions {0}/devices {0}/pipelines {0}/shards",
        url(endpoints.admin_addr)
    );
    Ok(endpoints)
}

/// What `--metrics-secure` and `--admin-auth` ask for: the metrics certificate (mounted and
/// watched for changes, or generated) and the reviewers, which ask the API server with the
/// operator's own client.
fn security(args: &RunArgs, ctx: &Arc<OperatorContext>) -> anyhow::Result<Security> {
    let metrics = if args.metrics_secure {
        let names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            format!("cinder-operator-metrics.{}.svc", ctx.lease_namespace),
        ];
        let cert = ServingCert::load(args.metrics_cert_dir.as_deref(), &names)
            .context("cannot set up the HTTPS metrics endpoint")?;
        tokio::spawn(cert.clone().watch(tls::RELOAD_INTERVAL));
        Some((
            cert,
            AccessReviewer::new(ctx.client.clone(), "/metrics", "get"),
        ))
    } else {
        None
    };
    let admin = args
        .admin_auth
        .then(|| AccessReviewer::new(ctx.client.clone(), access::ADMIN_PATH, access::ADMIN_VERB));
    Ok(Security { metrics, admin })
}

/// Runs the controllers (at once, or once this replica leads).
fn spawn_controllers(
    ctx: &Arc<OperatorContext>,
    leader: Option<&LeaderHandle>,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    match leader {
        Some(leader) => {
            println!(
                "leader election: waiting for the Lease {}/{LEADER_LEASE_NAME} (identity {})",
                ctx.lease_namespace,
                leader.lock().identity()
            );
            tokio::spawn(run_when_leader(ctx.clone(), leader.subscribe(), shutdown))
        }
        None => tokio::spawn(crate::controller::run_operator(ctx.clone(), shutdown)),
    }
}

/// With `--embedded`: prints the samples' progress until they are Ready.
fn follow_samples(
    client: &kube::Client,
    samples: &[embedded::Manifest],
) -> tokio::task::JoinHandle<()> {
    println!("kubectl get cinders,cinderbackends,cinderbackupbackends -A   # to look yourself");
    println!("following the samples (Ctrl-C to stop):");
    tokio::spawn(embedded::follow(
        client.clone(),
        embedded::tracked(samples),
        PROGRESS_INTERVAL,
        STUCK_AFTER,
        |line| println!("{line}"),
    ))
}

/// Waits for a signal (`Ok`) or for the controllers to end (always an error: they run until
/// told to stop).
async fn wait_for_end(
    mut signalled: tokio::sync::watch::Receiver<bool>,
    operator: &mut tokio::task::JoinHandle<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    tokio::select! {
        _ = signalled.wait_for(|s| *s) => Ok(()),
        finished = operator => match finished {
            Ok(Ok(())) => Err(anyhow::anyhow!("the controllers stopped unexpectedly")),
            Ok(Err(e)) if e.is::<LeadershipLost>() => Err(e),
            Ok(Err(e)) => Err(e.context("the controllers failed")),
            Err(e) => Err(anyhow::anyhow!("the controllers failed: {e}")),
        },
    }
}

/// What draining the coordinator gave: its guard (holding the root write lock), its error, or
/// a timeout.
type Drained = Result<
    Result<cinder_actors::ShutdownGuard, cinder_actors::LockError>,
    tokio::time::error::Elapsed,
>;

/// Lets in-flight passes finish (up to [`DRAIN_TIMEOUT`]), then drains the coordinator.
async fn drain(
    ctx: &Arc<OperatorContext>,
    operator: &mut tokio::task::JoinHandle<anyhow::Result<()>>,
) -> Drained {
    if !operator.is_finished()
        && tokio::time::timeout(DRAIN_TIMEOUT, &mut *operator)
            .await
            .is_err()
    {
        tracing::warn!(
            "the controllers did not stop within {} s",
            DRAIN_TIMEOUT.as_secs()
        );
        operator.abort();
    }
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, ctx.coordinator.shutdown()).await;
    match &drained {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!("draining the lock coordinator: {e}"),
        Err(_) => tracing::warn!(
            "in-flight transactions did not drain within {} s",
            DRAIN_TIMEOUT.as_secs()
        ),
    }
    drained
}

/// Releases the leader Lease so that a successor takes over at once (else it expires).
async fn release_leadership(leader: LeaderHandle) {
    match tokio::time::timeout(CONNECT_TIMEOUT, leader.release()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!("releasing the leader Lease: {e}; it will expire"),
        Err(_) => tracing::warn!("releasing the leader Lease timed out; it will expire"),
    }
}

/// Gives every shard Lease back so the other replicas take them on their next round (else they
/// expire).
async fn give_shards_back(shards: ShardHolderHandle) {
    if tokio::time::timeout(CONNECT_TIMEOUT, shards.release())
        .await
        .is_err()
    {
        tracing::warn!("giving the shards back timed out; they will expire");
    }
}

/// `/readyz`: the controllers' stores have synced.
pub fn readiness(ctx: &Arc<OperatorContext>) -> Readiness {
    let ctx = Arc::clone(ctx);
    Readiness::new(move || {
        (!ctx.is_ready()).then(|| "the controllers have not synced yet".to_string())
    })
}

/// `/readyz` with leader election (`leading`; `None`: no leader election): see
/// [`readiness_reason`].
pub fn leader_readiness(
    ctx: &Arc<OperatorContext>,
    leading: Option<tokio::sync::watch::Receiver<bool>>,
) -> Readiness {
    let ctx = Arc::clone(ctx);
    Readiness::new(move || readiness_reason(leading.as_ref().map(|l| *l.borrow()), ctx.is_ready()))
}

/// Why `/readyz` is 503 (`None`: 200). A standby (`leading` is `Some(false)`) is ready: it
/// serves its endpoints and waits for the Lease, and a rolling update of the operator's
/// Deployment needs every replica Ready (controller-runtime's convention). A leader, or a
/// process without leader election, is ready once its controllers have synced.
pub(crate) fn readiness_reason(leading: Option<bool>, synced: bool) -> Option<String> {
    if leading == Some(false) || synced {
        return None;
    }
    Some("the controllers have not synced yet".to_string())
}

/// Follows this replica's leadership until the elector ends: `gauge` (`cinder_operator_leader`)
/// is 1 while it leads and 0 while it stands by, and every change (and the state at start) is
/// an info line naming `identity`.
pub async fn follow_leadership(
    mut leading: tokio::sync::watch::Receiver<bool>,
    gauge: Gauge,
    identity: String,
) {
    let mut shown: Option<bool> = None;
    loop {
        let now = *leading.borrow_and_update();
        gauge.set(i64::from(now));
        if shown != Some(now) {
            if now {
                tracing::info!(%identity, lease = LEADER_LEASE_NAME, "leadership: this replica leads and reconciles");
            } else {
                tracing::info!(%identity, lease = LEADER_LEASE_NAME, "leadership: this replica is a standby and reconciles nothing");
            }
            shown = Some(now);
        }
        if leading.changed().await.is_err() {
            gauge.set(0);
            return;
        }
    }
}

/// The error [`run_when_leader`] ends with when this replica lost its leader Lease.
#[derive(Debug, thiserror::Error)]
#[error(
    "lost the leader Lease: stopped reconciling; exiting so that the pod restarts as a candidate"
)]
pub struct LeadershipLost;

/// Waits until `leading` turns true (or `shutdown`: then `Ok` without having reconciled), then
/// runs the controllers ([`crate::controller::run_operator`]) until `shutdown` (`Ok` once they
/// stopped) or until leadership is lost: then the controllers are stopped first and the result is
/// `Err(LeadershipLost)`. A replica that never leads reconciles nothing.
pub async fn run_when_leader(
    ctx: Arc<OperatorContext>,
    mut leading: tokio::sync::watch::Receiver<bool>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    tokio::select! {
        _ = shutdown.wait_for(|s| *s) => return Ok(()),
        became = leading.wait_for(|l| *l) => {
            if became.is_err() {
                anyhow::bail!("the leader elector stopped before this replica led");
            }
        }
    }
    tracing::info!("leading: starting the controllers");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut operator = tokio::spawn(crate::controller::run_operator(ctx.clone(), stop_rx));
    let lost = tokio::select! {
        _ = shutdown.wait_for(|s| *s) => false,
        _ = leading.wait_for(|l| !*l) => true,
        finished = &mut operator => return match finished {
            Ok(result) => result,
            Err(e) => Err(anyhow::anyhow!("the controllers failed: {e}")),
        },
    };
    if lost {
        ctx.set_ready(false);
    }
    let _ = stop_tx.send(true);
    let stopped = match tokio::time::timeout(DRAIN_TIMEOUT, &mut operator).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(anyhow::anyhow!("the controllers failed: {e}")),
        Err(_) => {
            operator.abort();
            Err(anyhow::anyhow!(
                "the controllers did not stop within {} s",
                DRAIN_TIMEOUT.as_secs()
            ))
        }
    };
    if lost {
        tracing::error!("lost the leader Lease: the controllers are stopped");
        return Err(LeadershipLost.into());
    }
    stopped
}

/// The admin views' sources: the context's coordinator, device locks and pipelines registry,
/// and the Cinders and CinderBackends listed from the API (in the watched namespace).
pub fn admin_sources(ctx: &Arc<OperatorContext>) -> AdminSources {
    let for_pipelines = Arc::clone(ctx);
    let pipelines: PipelinesSource = Arc::new(move || {
        let ctx = Arc::clone(&for_pipelines);
        Box::pin(async move { ctx.pipelines_snapshot().await })
    });
    let client = ctx.client.clone();
    let namespace = ctx.namespace.clone();
    let inventory: InventorySource = Arc::new(move || {
        let (client, namespace) = (client.clone(), namespace.clone());
        Box::pin(async move { list_inventory(client, namespace.as_deref()).await })
    });
    AdminSources {
        coordinator: ctx.coordinator.clone(),
        devices: ctx.device_locks.clone(),
        pipelines,
        inventory,
        shards: ctx.shards.clone(),
    }
}

/// The Cinders and CinderBackends (of `namespace`, else of all namespaces).
async fn list_inventory(
    client: kube::Client,
    namespace: Option<&str>,
) -> Result<Inventory, String> {
    let params = kube::api::ListParams::default();
    let cinders = crate::kube_ext::scoped::<Cinder>(&client, namespace)
        .list(&params)
        .await
        .map_err(|e| format!("listing Cinders: {e}"))?;
    let backends = crate::kube_ext::scoped::<CinderBackend>(&client, namespace)
        .list(&params)
        .await
        .map_err(|e| format!("listing CinderBackends: {e}"))?;
    Ok(Inventory {
        cinders: cinders.items,
        backends: backends.items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standby_is_ready_and_a_leader_once_synced() {
        assert_eq!(readiness_reason(Some(false), false), None);
        assert_eq!(readiness_reason(Some(false), true), None);
        assert_eq!(readiness_reason(Some(true), true), None);
        assert_eq!(readiness_reason(None, true), None);
        for leading in [Some(true), None] {
            let reason = readiness_reason(leading, false).unwrap_or_default();
            assert!(reason.contains("not synced"), "{leading:?}: {reason}");
        }
    }

    #[tokio::test]
    async fn the_leader_gauge_follows_every_change() {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let gauge = Gauge::default();
        let task = tokio::spawn(follow_leadership(rx, gauge.clone(), "me".into()));
        let settle = |want: i64| {
            let gauge = gauge.clone();
            async move {
                for _ in 0..200 {
                    if gauge.get() == want {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                panic!("the gauge stayed {} (wanted {want})", gauge.get());
            }
        };
        settle(0).await;
        tx.send(true).unwrap();
        settle(1).await;
        tx.send(false).unwrap();
        settle(0).await;
        tx.send(true).unwrap();
        settle(1).await;
        drop(tx);
        task.await.unwrap();
        assert_eq!(gauge.get(), 0, "an ended election leaves the gauge at 0");
    }
}
