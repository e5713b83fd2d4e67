//! The simulator's HTTPS listener certificate: self-signed for 127.0.0.1, localhost and the
//! names pods reach the API server by (the `kubernetes` Service's ClusterIP and DNS names, when
//! the cluster has one), generated at start-up, its PEM written into the kubeconfig as the
//! certificate authority.
//! Clients such as kubectl send bearer tokens only over TLS, so a cluster enforcing RBAC serves
//! its API over HTTPS as well.

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A generated certificate: the server configuration and the certificate's PEM.
pub struct ServingCert {
    pub config: rustls::ServerConfig,
    pub pem: String,
}

/// Generates the certificate (for 127.0.0.1, localhost and `extra_names`: IP addresses or DNS
/// names) and the TLS configuration serving it.
pub fn self_signed(extra_names: &[String]) -> Result<ServingCert, String> {
    let mut names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    names.extend(extra_names.iter().cloned());
    let generated = rcgen::generate_simple_self_signed(names).map_err(|e| e.to_string())?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        generated.signing_key.serialize_der(),
    ));
    let chain: Vec<CertificateDer<'static>> = vec![generated.cert.der().clone()];
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| e.to_string())?;
    Ok(ServingCert {
        config,
        pem: generated.cert.pem(),
    })
}
