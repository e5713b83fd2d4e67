//! A capture of every tracing line the process emits (to prove no secret value is logged).

use std::sync::{Arc, Mutex, OnceLock};

/// Every line the process's tracing output produced (one global subscriber per test binary).
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// The captured text so far.
    pub fn text(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl std::io::Write for LogCapture {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogCapture {
    type Writer = LogCapture;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Installs (once) a global subscriber writing every event at TRACE for the operator and DEBUG
/// for everything else into the capture, and returns the capture.
pub fn capture_logs() -> LogCapture {
    static CAPTURE: OnceLock<LogCapture> = OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let capture = LogCapture::default();
            let filter = tracing_subscriber::EnvFilter::new(
                "debug,cinder_operator=trace,hyper=info,h2=info,tower=info",
            );
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(capture.clone())
                .with_ansi(false)
                .try_init();
            capture
        })
        .clone()
}
