//! Guards against requests the local machine did not mean to make.
//!
//! - [`LoopbackPeer`]: the TCP peer must be a loopback address. Judged from the socket,
//!   never from a header a proxy or client could forge.
//! - [`browser_guard`]: because the API listens on localhost, any web page the user visits
//!   can send it requests. State-changing requests carrying a foreign `Origin` are refused,
//!   and while bound to loopback a `Host` that is not a loopback name is refused (a DNS
//!   rebinding attack arrives with the attacker's host name).

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::api::ApiError;

/// Extracting this succeeds only for requests whose TCP peer is on this machine.
pub struct LoopbackPeer;

impl<S: Send + Sync> FromRequestParts<S> for LoopbackPeer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        match peer {
            Some(ConnectInfo(addr)) if addr.ip().to_canonical().is_loopback() => Ok(Self),
            _ => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this endpoint only accepts requests from the local machine (127.0.0.1)",
            )),
        }
    }
}

/// How the server is bound, which decides whether the Host check applies.
#[derive(Clone, Copy)]
pub struct Binding {
    pub loopback: bool,
}

pub async fn browser_guard(
    State(binding): State<Binding>,
    request: Request,
    next: Next,
) -> Response {
    // Adapter routes receive platform webhooks, often through a reverse proxy that keeps the
    // public Host; they authenticate each request by its signature instead.
    if is_component_route(request.uri().path()) {
        return next.run(request).await;
    }
    match check(binding, request.method(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(message) => ApiError::new(StatusCode::FORBIDDEN, message).into_response(),
    }
}

fn check(binding: Binding, method: &Method, headers: &HeaderMap) -> Result<(), &'static str> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if binding.loopback && !host.is_some_and(is_loopback_host) {
        return Err("the Host header must name this machine (localhost or 127.0.0.1)");
    }
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if let Some(origin) = headers.get(header::ORIGIN)
        && !safe
    {
        let same_origin = match (origin.to_str(), host) {
            (Ok(origin), Some(host)) => origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .is_some_and(|rest| rest.eq_ignore_ascii_case(host)),
            _ => false,
        };
        if !same_origin {
            return Err("cross-origin requests may not change state");
        }
    }
    Ok(())
}

/// `/api/adapters/<name>/<anything but enable or disable>`.
fn is_component_route(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/api/adapters/") else {
        return false;
    };
    match rest.split_once('/') {
        Some((name, route)) => {
            !name.is_empty() && !route.is_empty() && !matches!(route, "enable" | "disable")
        }
        None => false,
    }
}

/// `localhost`, a 127.0.0.0/8 address or `[::1]`, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(origin) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        h
    }

    const LOOPBACK: Binding = Binding { loopback: true };

    #[test]
    fn only_component_routes_skip_the_browser_checks() {
        assert!(is_component_route("/api/adapters/teamchat/events"));
        assert!(is_component_route("/api/adapters/webhook/run/x"));
        assert!(!is_component_route("/api/adapters/teamchat/enable"));
        assert!(!is_component_route("/api/adapters/scheduler/disable"));
        assert!(!is_component_route("/api/adapters"));
        assert!(!is_component_route("/api/adapters/teamchat"));
        assert!(!is_component_route("/api/agents/x/y"));
    }

    #[test]
    fn host_names() {
        for ok in [
            "localhost",
            "localhost:8765",
            "127.0.0.1:1",
            "127.9.9.9",
            "[::1]:8765",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8765",
            "127.0.0.1.evil.example",
            "10.0.0.1:8765",
            "[::2]:1",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn origin_must_match_host_for_state_changes() {
        let same = headers("127.0.0.1:8765", Some("http://127.0.0.1:8765"));
        let foreign = headers("127.0.0.1:8765", Some("https://evil.example"));
        assert!(check(LOOPBACK, &Method::POST, &same).is_ok());
        assert!(check(LOOPBACK, &Method::POST, &foreign).is_err());
        assert!(
            check(
                LOOPBACK,
                &Method::DELETE,
                &headers("localhost:1", Some("null"))
            )
            .is_err()
        );
        assert!(check(LOOPBACK, &Method::GET, &foreign).is_ok());
        assert!(check(LOOPBACK, &Method::POST, &headers("localhost:1", None)).is_ok());
    }

    #[test]
    fn host_check_applies_only_on_loopback_binding() {
        let rebound = headers("evil.example:8765", None);
        assert!(check(LOOPBACK, &Method::GET, &rebound).is_err());
        assert!(check(Binding { loopback: false }, &Method::GET, &rebound).is_ok());
        assert!(check(LOOPBACK, &Method::GET, &HeaderMap::new()).is_err());
    }
}
