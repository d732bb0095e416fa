//! Outbound HTTP that cannot be pointed at this machine or its network.
//!
//! Every host name is resolved through [`GuardedResolver`], which drops loopback, private,
//! link-local (cloud metadata) and other non-public addresses, so the check holds after DNS
//! resolution and again on every redirect hop (each hop resolves anew). Hosts the operator
//! configured explicitly (a local SearXNG, a test fake) are trusted by name.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect::Policy;

/// Redirects any client of the service follows, each hop checked again.
pub const MAX_REDIRECTS: usize = 5;

/// TLS for the service's own clients (PostgreSQL, MCP servers): rustls with ring and the
/// Mozilla root certificates compiled in, so no system certificate store is needed.
pub fn rustls_config() -> anyhow::Result<rustls::ClientConfig> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    Ok(
        rustls::ClientConfig::builder_with_provider(
            rustls::crypto::ring::default_provider().into(),
        )
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

/// Whether an address is on the public internet.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)) // documentation
}

/// The address policy: public addresses only, except for hosts trusted by name.
#[derive(Clone)]
pub struct Guard {
    trusted: Arc<HashSet<String>>,
}

impl Guard {
    /// `trusted_hosts` are host names (or IP literals) the operator configured; they may be
    /// local.
    pub fn new(trusted_hosts: impl IntoIterator<Item = String>) -> Self {
        Self {
            trusted: Arc::new(
                trusted_hosts
                    .into_iter()
                    .map(|h| h.to_ascii_lowercase())
                    .collect(),
            ),
        }
    }

    fn allows(&self, host: &str) -> bool {
        self.trusted.contains(&host.to_ascii_lowercase())
    }

    /// A client builder whose every connection resolves through the guard. Callers choose
    /// the redirect policy.
    pub fn client_builder(&self) -> reqwest::ClientBuilder {
        reqwest::Client::builder()
            .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(GuardedResolver {
                guard: self.clone(),
            }))
    }

    /// A host written as an IP address is not resolved, so it is checked here instead.
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("refusing {url}: only http and https are allowed"));
        }
        let host = url
            .host_str()
            .ok_or_else(|| format!("refusing {url}: no host"))?;
        if self.allows(host) {
            return Ok(());
        }
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        match literal.parse::<IpAddr>() {
            Ok(ip) if !is_public(ip) => Err(format!("refusing {host}: a private or local address")),
            _ => Ok(()),
        }
    }
}

impl Guard {
    /// [`Guard::check_url`], then the host's addresses as they resolve now: for a URL given
    /// ahead of its use (a run's webhook), so one the policy refuses is refused at once. The
    /// check holds again at each use, through the client's resolver.
    pub async fn check_url_resolved(&self, url: &reqwest::Url) -> Result<(), String> {
        self.check_url(url)?;
        let host = url.host_str().unwrap_or_default();
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if self.allows(host) || literal.parse::<IpAddr>().is_ok() {
            return Ok(());
        }
        let port = url.port_or_known_default().unwrap_or(443);
        let resolved = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::lookup_host((host, port)),
        )
        .await
        .map_err(|_| format!("cannot resolve {host}: timed out"))?
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
        if resolved.into_iter().any(|a| is_public(a.ip())) {
            Ok(())
        } else {
            Err(PrivateAddress(host.to_owned()).to_string())
        }
    }
}

/// A name refused because it resolves to private or local addresses only.
#[derive(Debug, thiserror::Error)]
#[error("refusing {0}: it resolves to a private or local address")]
pub(crate) struct PrivateAddress(String);

/// Whether a request failed because the guard refused the address a name resolved to.
pub fn refused_by_guard(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if cause.is::<PrivateAddress>() {
            return true;
        }
        source = cause.source();
    }
    false
}

struct GuardedResolver {
    guard: Guard,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = if guard.allows(&host) {
                addrs
            } else {
                addrs.into_iter().filter(|a| is_public(a.ip())).collect()
            };
            if allowed.is_empty() {
                return Err(PrivateAddress(host).into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// An HTTP client for tools that fetch from the internet; redirects are followed, each hop
/// checked again.
#[derive(Clone)]
pub struct GuardedClient {
    client: reqwest::Client,
    guard: Guard,
}

impl GuardedClient {
    pub fn new(
        trusted_hosts: impl IntoIterator<Item = String>,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let guard = Guard::new(trusted_hosts);
        let for_redirects = guard.clone();
        let client = guard
            .client_builder()
            .redirect(Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
                }
                match for_redirects.check_url(attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(e) => attempt.error(e),
                }
            }))
            .timeout(timeout)
            .build()?;
        Ok(Self { client, guard })
    }

    /// A GET request, after checking the URL.
    pub fn get(&self, url: &str) -> Result<reqwest::RequestBuilder, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
        self.guard.check_url(&url)?;
        Ok(self.client.get(url))
    }
}

/// Reads a response body, failing once it grows past `limit` bytes.
pub async fn body_capped(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(describe)? {
        if body.len() + chunk.len() > limit {
            return Err(format!("the response is larger than {limit} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The host of a configured base URL, for trusting it.
pub fn host_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url).ok()?.host_str().map(str::to_owned)
}

/// Describes a failed request without its URL (which may carry a query the model wrote).
pub fn describe(e: reqwest::Error) -> String {
    use std::error::Error;
    let e = e.without_url();
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message = format!("{message}: {cause}");
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["1.1.1.1", "140.82.112.3", "2606:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn literal_hosts_are_checked_unless_trusted() {
        let guard = Guard::new(["127.0.0.1".to_owned()]);
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        assert!(guard.check_url(&url("http://127.0.0.1:9/x")).is_ok());
        assert!(guard.check_url(&url("http://127.0.0.2:9/x")).is_err());
        assert!(guard.check_url(&url("http://[::1]/")).is_err());
        assert!(
            guard
                .check_url(&url("http://169.254.169.254/latest"))
                .is_err()
        );
        assert!(guard.check_url(&url("file:///etc/passwd")).is_err());
        assert!(guard.check_url(&url("https://example.com/")).is_ok());
    }

    #[tokio::test]
    async fn names_resolving_to_local_addresses_are_refused_and_said_so() {
        let client = Guard::new([]).client_builder().build().unwrap();
        let refused = client.get("http://localhost:9/").send().await.unwrap_err();
        assert!(refused_by_guard(&refused), "{refused:?}");
        assert!(describe(refused).contains("refusing localhost: it resolves to a private"));

        let trusted = Guard::new(["localhost".to_owned()])
            .client_builder()
            .build()
            .unwrap();
        let unreachable = trusted.get("http://localhost:9/").send().await.unwrap_err();
        assert!(
            !refused_by_guard(&unreachable),
            "connection refused, not the guard"
        );
    }
}
