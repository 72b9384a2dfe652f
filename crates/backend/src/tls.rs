//! TLS for the lab's backends: a certificate authority made for one run, and the server side of
//! a backend that speaks TLS, so that a configuration's `proxy_pass https://…` is played as its
//! author wrote it (handshakes, `proxy_ssl_verify`, `proxy_ssl_name`) and not rewritten to HTTP.
//!
//! The authority lives as long as the run: its key is never written anywhere, its certificate
//! is written into the run directory for the proxy to trust (`proxy_ssl_trusted_certificate`).
//! One leaf certificate, signed by it, covers every name the run's DNS authority serves and every
//! backend address; each TLS backend presents it.
//!
//! ```
//! use resolvelab_backend::tls::RunCa;
//! let ca = RunCa::new(&["api.example.com".to_string()], &["127.0.0.20".parse().unwrap()]).unwrap();
//! assert!(ca.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
//! let _config = ca.server_config(); // what a backend's `BackendConfig::tls` takes
//! ```

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::net::IpAddr;
use std::sync::Arc;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A run's certificate authority and the leaf certificate its TLS backends present.
pub struct RunCa {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    server: Arc<ServerConfig>,
}

impl RunCa {
    /// A new authority (a fresh key) and a leaf for these DNS names and addresses.
    pub fn new(names: &[String], ips: &[IpAddr]) -> anyhow::Result<RunCa> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.distinguished_name
            .push(DnType::CommonName, "resolvelab run CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);

        let mut leaf = CertificateParams::new(names.to_vec())
            .map_err(|e| anyhow::anyhow!("a TLS name is not a DNS name ({e}): {names:?}"))?;
        leaf.distinguished_name
            .push(DnType::CommonName, names.first().map_or("backend", |n| n));
        leaf.subject_alt_names
            .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        let leaf_key = KeyPair::generate()?;
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;

        let chain = vec![
            CertificateDer::from(leaf_cert.der().to_vec()),
            CertificateDer::from(ca_cert.der().to_vec()),
        ];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        // ring, not aws-lc-rs (rustls' default, which builds a C library with cmake and would
        // grow the cold build): its provider is deprecated only for lacking post-quantum key
        // exchange, which nothing between two processes on loopback needs.
        #[allow(deprecated)]
        let provider = Arc::new(ring::default_provider());
        let server = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
        Ok(RunCa {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            server: Arc::new(server),
        })
    }

    /// The authority's certificate (PEM), for the proxy to trust.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The authority's certificate (DER), for a client of ours to trust.
    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.ca_der.clone()
    }

    /// The server side every TLS backend of the run uses (`BackendConfig::tls`).
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }
}
