//! Logs and traces of `cinder-operator run`.
//!
//! Logs go to stderr as JSON lines (`--log-format json`, one object per line) or as text; the
//! level comes from `--log-level` (default `warn`), refined by `RUST_LOG` directives when that
//! is set ([`log_filter`]). A reconcile pass runs in a [`pass_span`] (Cinder namespace and name,
//! and the pass's trace id) and each step in a [`step_span`], so every line logged during a pass
//! carries the Cinder, the step and the trace id.
//!
//! With `--otlp-endpoint` the spans are exported over OTLP/gRPC (batched): one span per pass, a
//! child per step, and below them a child per Kubernetes API call (kube's own `HTTP` spans).
//! Without it the trace ids still exist (they appear in the logs) and
//! nothing is sent anywhere.

use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::filter::{EnvFilter, FilterExt as _, dynamic_filter_fn, filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, Registry};

/// The service name spans are exported under.
pub(crate) const SERVICE_NAME: &str = "cinder-operator";
/// The name of the span of one reconcile pass.
pub(crate) const PASS_SPAN: &str = "reconcile";
/// The name of the span of one step.
pub(crate) const STEP_SPAN: &str = "step";
/// Directives always added: kube-client logs every failed request at ERROR, and the operator
/// reports what failed itself.
const QUIET: &str = "kube_client::client::builder=off";

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (`timestamp`, `level`, `fields.message`, `target`, `spans`).
    Json,
    /// Human-readable text.
    #[default]
    Text,
}

/// What [`init`] sets up.
#[derive(Clone, Debug, Default)]
pub struct TelemetryOptions {
    pub log_format: LogFormat,
    /// `--log-level`: a level or any `RUST_LOG`-style directive list.
    pub log_level: Option<String>,
    /// `--otlp-endpoint`: where spans go (`http://collector:4317`); `None` exports nothing.
    pub otlp_endpoint: Option<String>,
}

/// A bad `--log-level`, `RUST_LOG` or `--otlp-endpoint`.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("invalid log filter {filter:?}: {reason}")]
    Filter { filter: String, reason: String },
    #[error("invalid --otlp-endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
}

/// The log filter: `level` (default `warn`), then the always-quiet directives, then `rust_log`
/// (whose directives win for the targets they name).
pub(crate) fn log_filter(
    level: Option<&str>,
    rust_log: Option<&str>,
) -> Result<EnvFilter, TelemetryError> {
    let mut text = level.unwrap_or("warn").trim().to_string();
    text.push(',');
    text.push_str(QUIET);
    if let Some(extra) = rust_log.map(str::trim).filter(|s| !s.is_empty()) {
        text.push(',');
        text.push_str(extra);
    }
    EnvFilter::builder()
        .parse(&text)
        .map_err(|e| TelemetryError::Filter {
            filter: text.clone(),
            reason: e.to_string(),
        })
}

/// Checks an OTLP endpoint: an `http://` or `https://` URL with a host.
pub(crate) fn check_endpoint(endpoint: &str) -> Result<(), TelemetryError> {
    let bad = |reason: &str| TelemetryError::Endpoint {
        endpoint: endpoint.to_string(),
        reason: reason.to_string(),
    };
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .ok_or_else(|| bad("it must start with http:// or https://"))?;
    if rest.is_empty() || rest.starts_with(['/', ':']) {
        return Err(bad("it names no host"));
    }
    Ok(())
}

/// The installed telemetry; [`Telemetry::shutdown`] flushes the spans not yet exported.
pub(crate) struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Exports what is still buffered and stops the exporter.
    pub(crate) fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "flushing the trace exporter");
        }
    }
}

/// The tracer provider: with an endpoint, a batch exporter over OTLP/gRPC (call inside a Tokio
/// runtime); without, spans get ids and go nowhere.
pub fn tracer_provider(endpoint: Option<&str>) -> anyhow::Result<SdkTracerProvider> {
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(SERVICE_NAME)
        .build();
    let builder = SdkTracerProvider::builder().with_resource(resource);
    let Some(endpoint) = endpoint else {
        return Ok(builder.build());
    };
    check_endpoint(endpoint)?;
    use opentelemetry_otlp::WithExportConfig as _;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()?;
    Ok(builder.with_batch_exporter(exporter).build())
}

/// Whether the trace layer records a span: the operator's own spans and kube's per-request
/// `HTTP` spans made inside one of them (the watches' requests, outside any pass, are left out).
fn traced<S>() -> impl tracing_subscriber::layer::Filter<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    dynamic_filter_fn(|meta, cx| {
        if !meta.is_span() {
            return false;
        }
        let target = meta.target();
        if target.starts_with("cinder_") {
            return true;
        }
        target.starts_with("kube_client") && meta.name() == "HTTP" && cx.lookup_current().is_some()
    })
}

/// Leaves out kube-runtime's spans, its per-reconcile "reconciling object" above all: the
/// controller's runner polls every reconcile in flight whenever any of them or a trigger wakes
/// it, entering that span each time: a sixth of the operator's CPU at a thousand
/// Cinders. The operator's own pass span carries the same Cinder; kube-runtime's events
/// (log lines) still pass.
fn no_runner_spans<S: tracing::Subscriber>() -> impl tracing_subscriber::Layer<S> {
    filter_fn(|meta| !(meta.is_span() && meta.target().starts_with("kube_runtime")))
}

/// The subscriber: the log layer (format and filter of `options`, `rust_log` refining the level;
/// the operator's own spans always pass, so lines carry the pass's fields) writing to `writer`,
/// and the trace layer feeding `provider`.
pub fn subscriber<W>(
    options: &TelemetryOptions,
    rust_log: Option<&str>,
    provider: &SdkTracerProvider,
    writer: W,
    ansi: bool,
) -> Result<impl tracing::Subscriber + Send + Sync + 'static, TelemetryError>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = log_filter(options.log_level.as_deref(), rust_log)?;
    let own_spans = filter_fn(|meta| meta.is_span() && meta.target().starts_with("cinder_"));
    let log_filter = own_spans.or(filter);
    let logs = match options.log_format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(false)
            .with_span_list(true)
            .with_writer(writer)
            .with_filter(log_filter)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(ansi)
            .with_filter(log_filter)
            .boxed(),
    };
    let traces = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(SERVICE_NAME))
        .with_filter(traced());
    Ok(Registry::default()
        .with(no_runner_spans())
        .with(logs)
        .with(traces))
}

/// Installs the global subscriber ([`subscriber`] on stderr, `RUST_LOG` from the environment).
/// Call inside a Tokio runtime when an endpoint is given.
pub(crate) fn init(options: &TelemetryOptions) -> anyhow::Result<Telemetry> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let provider = tracer_provider(options.otlp_endpoint.as_deref())?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    subscriber(
        options,
        rust_log.as_deref(),
        &provider,
        std::io::stderr,
        ansi,
    )?
    .try_init()?;
    Ok(Telemetry { provider })
}

/// The pass of one Cinder: its span (namespace, name and trace id as fields; the trace id is
/// empty when no trace layer is installed). The pass runs inside it, and so do its steps
/// ([`step_span`] is a child of the current span).
pub(crate) struct PassSpan {
    pub span: Span,
}

/// Starts the span of one reconcile pass of `namespace/name`.
pub(crate) fn pass_span(namespace: &str, name: &str) -> PassSpan {
    let span = tracing::info_span!(
        PASS_SPAN,
        namespace = %namespace,
        cinder = %name,
        trace_id = tracing::field::Empty,
        otel.name = %format!("reconcile {namespace}/{name}"),
    );
    if let Some(id) = trace_id(&span) {
        span.record("trace_id", id.as_str());
    }
    PassSpan { span }
}

/// The span of one step of the pass running in the current span (its pass span).
pub(crate) fn step_span(step: &'static str) -> Span {
    tracing::info_span!(STEP_SPAN, step, otel.name = step)
}

/// Logs (at debug) how a step ended, in its span.
pub(crate) fn step_ran(result: &crate::pipeline::StepResult, elapsed: std::time::Duration) {
    use crate::pipeline::Outcome;
    let ms = elapsed.as_secs_f64() * 1000.0;
    match result {
        Ok(Outcome::Continue) => tracing::debug!(ms, "step continued"),
        Ok(Outcome::RequeueAfter(d)) => {
            tracing::debug!(ms, requeue_s = d.as_secs_f64(), "step asked to requeue");
        }
        Err(e) => tracing::debug!(ms, error = %e, "step failed"),
        Ok(Outcome::ContinueDespite(e)) => {
            tracing::debug!(ms, error = %e, "step failed and continued with last-good artefacts");
        }
    }
}

/// The trace id of `span` as 32 hex digits, when it has a valid one.
pub(crate) fn trace_id(span: &Span) -> Option<String> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| sc.trace_id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_defaults_to_warn_and_rust_log_refines_it() {
        let f = log_filter(None, None).unwrap().to_string();
        assert!(f.contains("warn") && f.contains(QUIET), "{f}");
        let f = log_filter(Some("info"), Some("cinder_operator=debug"))
            .unwrap()
            .to_string();
        assert!(
            f.contains("cinder_operator=debug") && f.contains("info"),
            "{f}"
        );
        let e = log_filter(Some("loud=maybe"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid log filter"), "{e}");
    }

    #[test]
    fn endpoints_must_be_http_urls_with_a_host() {
        assert!(check_endpoint("http://collector:4317").is_ok());
        assert!(check_endpoint("https://otel.example").is_ok());
        for bad in ["collector:4317", "http://", "grpc://x", "http://:4317"] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_pass_span_carries_a_trace_id_under_the_trace_layer() {
        let provider = tracer_provider(None).unwrap();
        let subscriber = Registry::default().with(
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer(SERVICE_NAME))
                .with_filter(traced()),
        );
        tracing::subscriber::with_default(subscriber, || {
            let pass = pass_span("ns", "c");
            let id = trace_id(&pass.span).unwrap_or_default();
            assert_eq!(id.len(), 32, "{id}");
            // A step started inside its pass's span belongs to the pass's trace.
            let step = pass.span.in_scope(|| step_span("Secrets"));
            assert_eq!(trace_id(&step).as_deref(), Some(id.as_str()));
            let orphan = step_span("Secrets");
            assert_ne!(trace_id(&orphan).as_deref(), Some(id.as_str()));
        });
    }

    #[test]
    fn kube_runtime_spans_are_left_out_and_the_operators_kept() {
        let options = TelemetryOptions {
            log_format: LogFormat::Text,
            log_level: Some("trace".to_string()),
            otlp_endpoint: None,
        };
        let provider = tracer_provider(None).unwrap();
        let subscriber = subscriber(&options, None, &provider, std::io::sink, false).unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let runner =
                tracing::info_span!(target: "kube_runtime::controller", "reconciling object");
            assert!(runner.is_disabled());
            assert!(!pass_span("ns", "c").span.is_disabled());
        });
    }
}
