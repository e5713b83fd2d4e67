//! The certificate of the HTTPS metrics endpoint: read from a mounted directory (`tls.crt`,
//! `tls.key`, PEM, as a `kubernetes.io/tls` Secret or cert-manager writes them) and reloaded when
//! those files change, or generated (self-signed) at start-up when no directory is given or the
//! directory holds neither file yet (an optional Secret not created). A reload that fails keeps
//! serving the previous certificate and logs why.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How often the mounted files are compared with the loaded ones.
pub(crate) const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// The certificate could not be read, parsed or generated.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(String),
    #[error("cannot build the TLS configuration: {0}")]
    Config(String),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The PEM bytes a certificate was loaded from.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pem {
    cert: Vec<u8>,
    key: Vec<u8>,
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The PEM files of `dir`; None when neither exists.
fn read_dir(dir: &Path) -> Result<Option<Pem>, TlsError> {
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    if !cert.exists() && !key.exists() {
        return Ok(None);
    }
    Ok(Some(Pem {
        cert: read(&cert)?,
        key: read(&key)?,
    }))
}

fn certified(pem: &Pem, dir: &Path) -> Result<CertifiedKey, TlsError> {
    let parse = |file: &str, message: String| TlsError::Parse {
        path: dir.join(file),
        message,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem.cert)
        .collect::<Result<_, _>>()
        .map_err(|e| parse("tls.crt", e.to_string()))?;
    if chain.is_empty() {
        return Err(parse("tls.crt", "no CERTIFICATE block".into()));
    }
    let key =
        PrivateKeyDer::from_pem_slice(&pem.key).map_err(|e| parse("tls.key", e.to_string()))?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|e| parse("tls.key", e.to_string()))
}

/// A self-signed certificate for `names` (DNS names or IP addresses).
pub(crate) fn self_signed(names: &[String]) -> Result<CertifiedKey, TlsError> {
    let generated = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|e| TlsError::Generate(e.to_string()))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        generated.signing_key.serialize_der(),
    ));
    CertifiedKey::from_der(vec![generated.cert.der().clone()], key, &provider())
        .map_err(|e| TlsError::Generate(e.to_string()))
}

/// The certificate being served; swapped in place on reload.
#[derive(Debug)]
pub struct ServingCert {
    current: RwLock<Arc<CertifiedKey>>,
    /// The mounted directory and the PEM last loaded from it (None: a generated certificate is
    /// served).
    source: Option<(PathBuf, RwLock<Option<Pem>>)>,
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

impl ServingCert {
    /// Loads the certificate of `dir`, or generates one for `names` when `dir` is None or holds
    /// neither file.
    pub fn load(dir: Option<&Path>, names: &[String]) -> Result<Arc<ServingCert>, TlsError> {
        let pem = match dir {
            Some(dir) => read_dir(dir)?,
            None => None,
        };
        let key = match (&pem, dir) {
            (Some(pem), Some(dir)) => certified(pem, dir)?,
            _ => self_signed(names)?,
        };
        let source = dir.map(|d| (d.to_path_buf(), RwLock::new(pem)));
        Ok(Arc::new(ServingCert {
            current: RwLock::new(Arc::new(key)),
            source,
        }))
    }

    /// The DER of the certificate being served.
    #[cfg(test)]
    fn certificate(&self) -> Vec<u8> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        current.cert.first().map(|c| c.to_vec()).unwrap_or_default()
    }

    /// Reloads from the mounted directory when its files changed: Ok(true) when a new
    /// certificate is served, Ok(false) when nothing changed (or nothing is mounted).
    pub(crate) fn reload(&self) -> Result<bool, TlsError> {
        let Some((dir, loaded)) = &self.source else {
            return Ok(false);
        };
        // files gone: keep serving what was loaded last
        let Some(pem) = read_dir(dir)? else {
            return Ok(false);
        };
        if loaded.read().unwrap_or_else(|e| e.into_inner()).as_ref() == Some(&pem) {
            return Ok(false);
        }
        let key = certified(&pem, dir)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
        *loaded.write().unwrap_or_else(|e| e.into_inner()) = Some(pem);
        Ok(true)
    }

    /// Polls the mounted files every `interval` until the task is dropped.
    pub(crate) async fn watch(self: Arc<Self>, interval: Duration) {
        if self.source.is_none() {
            return;
        }
        loop {
            tokio::time::sleep(interval).await;
            match self.reload() {
                Ok(true) => tracing::info!("reloaded the metrics endpoint's TLS certificate"),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot reload the metrics endpoint's TLS certificate; serving the previous one")
                }
            }
        }
    }

    /// A rustls server configuration serving this certificate.
    pub(crate) fn server_config(self: &Arc<Self>) -> Result<rustls::ServerConfig, TlsError> {
        Ok(rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> Vec<u8> {
        let generated = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        std::fs::write(dir.join("tls.crt"), generated.cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), generated.signing_key.serialize_pem()).unwrap();
        generated.cert.der().to_vec()
    }

    #[test]
    fn mounted_certificate_is_served_and_reloaded_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        // an empty mount: a generated certificate until the files appear
        let cert = ServingCert::load(Some(dir.path()), &["localhost".to_string()]).unwrap();
        let generated = cert.certificate();
        assert!(!generated.is_empty());
        assert!(!cert.reload().unwrap());
        let first = write_pair(dir.path(), "one.example");
        assert!(cert.reload().unwrap());
        assert_eq!(cert.certificate(), first);
        assert!(!cert.reload().unwrap(), "unchanged files are not reloaded");
        let second = write_pair(dir.path(), "two.example");
        assert!(cert.reload().unwrap());
        assert_eq!(cert.certificate(), second);
        // a broken file keeps the previous certificate
        std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
        assert!(cert.reload().is_err());
        assert_eq!(cert.certificate(), second);
        assert!(cert.server_config().is_ok());
    }

    #[test]
    fn without_a_mount_a_certificate_is_generated_and_bad_mounts_are_refused() {
        let cert = ServingCert::load(None, &["localhost".to_string()]).unwrap();
        assert!(!cert.certificate().is_empty());
        assert!(!cert.reload().unwrap());
        let half = tempfile::tempdir().unwrap();
        std::fs::write(half.path().join("tls.key"), "x").unwrap();
        let err = ServingCert::load(Some(half.path()), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("tls.crt"), "{err}");
    }
}
