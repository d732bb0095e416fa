//! TLS for the IMAP connection: rustls with the Mozilla root certificates compiled in, so the
//! adapter trusts what browsers trust and needs no system certificate store.

use std::sync::{Arc, OnceLock};

use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto};

use crate::failure::{Failure, Kind, with_causes};

fn client_config() -> Result<Arc<ClientConfig>, Failure> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, Failure>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            ClientConfig::builder_with_provider(Arc::new(crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map(|builder| {
                    Arc::new(builder.with_root_certificates(roots).with_no_client_auth())
                })
                .map_err(|error| Failure::new(Kind::Tls, format!("no usable TLS setup: {error}")))
        })
        .clone()
}

/// Secures `stream` to `host`, checking its certificate against the public roots.
pub async fn secure(stream: TcpStream, host: &str) -> Result<TlsStream<TcpStream>, Failure> {
    let name = ServerName::try_from(host.to_owned()).map_err(|_| {
        Failure::new(
            Kind::Config,
            format!("{host:?} is not a valid TLS server name"),
        )
    })?;
    TlsConnector::from(client_config()?)
        .connect(name, stream)
        .await
        .map_err(|error| {
            Failure::new(
                Kind::Tls,
                format!("TLS handshake with {host} failed: {}", with_causes(&error)),
            )
        })
}
