//! The TLS port's rustls settings (ring provider): the server's
//! certificate chain and key, and, with a CA file, the verifier of client
//! certificates (required, or optional, as `--tls-auth-clients` says).

use std::sync::Arc;

use anyhow::{anyhow, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::config::{TlsAuthClients, TlsConfig};

/// Builds the rustls server settings from the files `cfg` names.
pub fn server_config(cfg: &TlsConfig) -> anyhow::Result<Arc<ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = read_certs(&cfg.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&cfg.key_file)
        .map_err(|e| anyhow!("reading the TLS key {}: {e}", cfg.key_file.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match (&cfg.ca_cert_file, cfg.auth_clients) {
        (Some(ca), auth) if auth != TlsAuthClients::No => {
            let mut roots = RootCertStore::empty();
            for c in read_certs(ca)? {
                roots.add(c).map_err(|e| anyhow!("CA certificate in {}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == TlsAuthClients::Optional { verifier.allow_unauthenticated() } else { verifier };
            let verifier = verifier.build().map_err(|e| anyhow!("client certificate verifier: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| anyhow!("TLS certificate and key: {e}"))?;
    Ok(Arc::new(config))
}

fn read_certs(path: &std::path::Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| anyhow!("reading certificates from {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("reading certificates from {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(anyhow!("no certificate in {}", path.display()));
    }
    Ok(certs)
}
