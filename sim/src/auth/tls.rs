//! The simulator's HTTPS listener certificate: self-signed for 127.0.0.1 and localhost,
//! generated at start-up, its PEM written into the kubeconfig as the certificate authority.
//! Clients such as kubectl send bearer tokens only over TLS, so a cluster enforcing RBAC serves
//! its API over HTTPS as well.

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A generated certificate: the server configuration and the certificate's PEM.
pub struct ServingCert {
    pub config: rustls::ServerConfig,
    pub pem: String,
}

/// Generates the certificate and the TLS configuration serving it.
pub fn self_signed() -> Result<ServingCert, String> {
    let generated =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .map_err(|e| e.to_string())?;
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
