//! Helpers of the observability tests: the process-wide telemetry of the test binary (the
//! operator's own log and trace layers, logs captured as JSON lines, spans exported over
//! OTLP/gRPC to an in-process receiver), headless Chromium (`--dump-dom`, `--screenshot`), a
//! raw HTTP GET that keeps the response headers, kubectl, promtool, and the artefact folder
//! under the target directory.

use crate::log_capture::LogCapture;
use anyhow::Context as _;
use cinder_operator::telemetry::{self, LogFormat, TelemetryOptions};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span as OtlpSpan;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Telemetry of the test binary

/// The spans an OTLP receiver got, in arrival order.
#[derive(Clone, Default)]
pub struct ReceivedSpans(Arc<Mutex<Vec<OtlpSpan>>>);

impl ReceivedSpans {
    /// A copy of every span received so far.
    pub fn all(&self) -> Vec<OtlpSpan> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[tonic::async_trait]
impl TraceService for ReceivedSpans {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans = request
            .into_inner()
            .resource_spans
            .into_iter()
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans);
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(spans);
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// The telemetry every scenario of the binary shares: one global subscriber built by the
/// operator's [`telemetry::subscriber`] (JSON logs at `info,cinder_operator=debug` into
/// [`Self::logs`], spans to [`Self::spans`] through an OTLP/gRPC receiver on 127.0.0.1).
pub struct TestTelemetry {
    pub logs: LogCapture,
    pub spans: ReceivedSpans,
    /// Where the receiver listens (`http://127.0.0.1:port`).
    pub endpoint: String,
    provider: SdkTracerProvider,
}

impl TestTelemetry {
    /// Exports the spans still buffered (the batch exporter sends every few seconds otherwise).
    pub fn flush(&self) {
        let _ = self.provider.force_flush();
    }
}

/// Installs the binary's telemetry once (call first in every scenario, before anything else
/// installs a global subscriber) and returns it. The receiver and the exporter run on a thread
/// and runtime of their own, so they outlive each test's runtime.
pub fn test_telemetry() -> &'static TestTelemetry {
    static TELEMETRY: OnceLock<TestTelemetry> = OnceLock::new();
    TELEMETRY.get_or_init(|| match start_telemetry() {
        Ok(t) => t,
        Err(e) => panic!("cannot start the test telemetry: {e:#}"),
    })
}

fn start_telemetry() -> anyhow::Result<TestTelemetry> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("otlp-receiver".to_string())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(anyhow::anyhow!("runtime: {e}")));
                    return;
                }
            };
            runtime.block_on(async move {
                let spans = ReceivedSpans::default();
                let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = tx.send(Err(anyhow::anyhow!("binding the receiver: {e}")));
                        return;
                    }
                };
                let endpoint = match listener.local_addr() {
                    Ok(a) => format!("http://{a}"),
                    Err(e) => {
                        let _ = tx.send(Err(anyhow::anyhow!("receiver address: {e}")));
                        return;
                    }
                };
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                let server = tonic::transport::Server::builder()
                    .add_service(TraceServiceServer::new(spans.clone()))
                    .serve_with_incoming(incoming);
                let provider = telemetry::tracer_provider(Some(&endpoint));
                let _ = tx.send(provider.map(|p| (p, spans, endpoint)));
                let _ = server.await;
            });
        })?;
    let (provider, spans, endpoint) = rx
        .recv_timeout(Duration::from_secs(30))
        .context("the receiver thread did not start")??;
    let logs = LogCapture::default();
    let options = TelemetryOptions {
        log_format: LogFormat::Json,
        log_level: Some("info,cinder_operator=debug".to_string()),
        otlp_endpoint: Some(endpoint.clone()),
    };
    let subscriber = telemetry::subscriber(&options, None, &provider, logs.clone(), false)?;
    tracing::subscriber::set_global_default(subscriber)
        .context("another global subscriber was installed first")?;
    Ok(TestTelemetry {
        logs,
        spans,
        endpoint,
        provider,
    })
}

/// A span attribute's string value.
pub fn span_attr(span: &OtlpSpan, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            AnyValue::IntValue(i) => i.to_string(),
            AnyValue::BoolValue(b) => b.to_string(),
            AnyValue::DoubleValue(d) => d.to_string(),
            other => format!("{other:?}"),
        })
}

// ---------------------------------------------------------------------------------------------
// Tools

/// The path of `program` on PATH, if any.
pub fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

/// Runs `program args` (30 min at most is the test runner's business): its output.
pub fn run(program: &Path, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<Output> {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output()
        .with_context(|| format!("running {} {}", program.display(), args.join(" ")))
}

/// The folder the tests keep their artefacts in: `<target dir>/observability`.
pub fn artefact_dir() -> anyhow::Result<PathBuf> {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            // The test executable is <target>/<profile>/deps/<name>.
            let exe = std::env::current_exe()?;
            exe.ancestors()
                .nth(3)
                .map(Path::to_path_buf)
                .context("the test executable has no target folder")?
        }
    };
    let dir = target.join("observability");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Headless Chromium (Debian's `chromium`), each run with a fresh profile folder.
pub struct Browser {
    bin: PathBuf,
    profiles: tempfile::TempDir,
}

impl Browser {
    /// `None` when no `chromium` is on PATH.
    pub fn find() -> anyhow::Result<Option<Browser>> {
        let Some(bin) = on_path("chromium").or_else(|| on_path("chromium-browser")) else {
            return Ok(None);
        };
        Ok(Some(Browser {
            bin,
            profiles: tempfile::tempdir()?,
        }))
    }

    fn run(&self, extra: &[&str], url: &str) -> anyhow::Result<Output> {
        let profile = tempfile::tempdir_in(self.profiles.path())?;
        let profile_arg = format!("--user-data-dir={}", profile.path().display());
        let mut args = vec![
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            profile_arg.as_str(),
        ];
        args.extend_from_slice(extra);
        args.push(url);
        let out = run(&self.bin, &args, &[])?;
        anyhow::ensure!(
            out.status.success(),
            "chromium {} failed: {}",
            url,
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(out)
    }

    /// The DOM of `url` after its scripts ran for `budget_ms` of virtual time.
    pub fn dump_dom(&self, url: &str, budget_ms: u32) -> anyhow::Result<String> {
        let budget = format!("--virtual-time-budget={budget_ms}");
        let out = self.run(&["--dump-dom", budget.as_str()], url)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A PNG screenshot of `url` at 1280×900 written to `path`.
    pub fn screenshot(&self, url: &str, path: &Path) -> anyhow::Result<()> {
        let target = format!("--screenshot={}", path.display());
        self.run(&[target.as_str(), "--window-size=1280,900"], url)?;
        anyhow::ensure!(path.is_file(), "no screenshot at {}", path.display());
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP

/// A response: status, headers (lowercase names) and body.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawResponse {
    /// The value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A plain HTTP/1.0 GET of `path` on `addr`, keeping the headers (blocking, 30 s timeouts).
pub fn raw_get(addr: &str, path: &str) -> anyhow::Result<RawResponse> {
    let timeout = Some(Duration::from_secs(30));
    let mut stream =
        std::net::TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(timeout)?;
    stream.set_write_timeout(timeout)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("no header/body separator")?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .context("no status line")?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
        .collect();
    Ok(RawResponse {
        status,
        headers,
        body: body.to_string(),
    })
}
