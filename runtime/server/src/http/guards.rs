//! Guards against requests the local machine did not mean to make.
//!
//! - [`LoopbackPeer`]: the TCP peer must be a loopback address. Judged from the socket,
//!   never from a header a proxy or client could forge.
//! - [`browser_guard`]: because the API listens on localhost, any web page the user visits
//!   can send it requests. State-changing requests carrying a foreign `Origin` are refused,
//!   and while bound to loopback a `Host` that is not a loopback name is refused (a DNS
//!   rebinding attack arrives with the attacker's host name). A request whose Host or Origin
//!   could be read two ways (repeated, or a Host with more than a name and a port) is a 400
//!   on every route.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::api_error::ApiError;

/// Extracting this succeeds only for requests whose TCP peer is on this machine (spec 4.1 and
/// 5: the task delete and the key write), or for any peer with `[auth] remote_admin`.
pub struct LoopbackPeer;

impl FromRequestParts<AppState> for LoopbackPeer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, ApiError> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>();
        match peer {
            Some(ConnectInfo(addr)) if addr.ip().to_canonical().is_loopback() => Ok(Self),
            Some(_) if app.access.remote_admin() => Ok(Self),
            _ => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this endpoint only accepts requests from the local machine (127.0.0.1); \
                 [auth] remote_admin = true opens it to admins elsewhere",
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
    let headers = request.headers();
    let checked = unambiguous(headers).and_then(|host| {
        // Adapter routes receive platform webhooks, often through a reverse proxy that keeps
        // the public Host; they authenticate each request by its signature instead.
        let path = request.uri().path();
        if is_component_route(path) {
            Ok(())
        } else {
            // MCP asks servers to refuse a foreign Origin on every request (its GET streams
            // too): DNS rebinding.
            let any_method = path == "/mcp" || path.starts_with("/mcp/");
            check(binding, request.method(), any_method, host, headers)
        }
    });
    match checked {
        Ok(()) => next.run(request).await,
        Err((status, message)) => ApiError::new(status, message).into_response(),
    }
}

type Refusal = (StatusCode, &'static str);

/// The request's Host as (name, port), refusing what two parts of a stack could read two
/// ways: a repeated Host or Origin, or a Host that is more than a name and a port
/// (`localhost:1@evil.example`).
fn unambiguous(headers: &HeaderMap) -> Result<Option<Authority<'_>>, Refusal> {
    for name in [header::HOST, header::ORIGIN] {
        if headers.get_all(&name).iter().nth(1).is_some() {
            return Err((
                StatusCode::BAD_REQUEST,
                if name == header::HOST {
                    "the request has more than one Host header"
                } else {
                    "the request has more than one Origin header"
                },
            ));
        }
    }
    let Some(host) = headers.get(header::HOST) else {
        return Ok(None);
    };
    host.to_str()
        .ok()
        .and_then(Authority::parse)
        .map(Some)
        .ok_or((
            StatusCode::BAD_REQUEST,
            "the Host header must be a host name or address with an optional port",
        ))
}

fn check(
    binding: Binding,
    method: &Method,
    any_method: bool,
    host: Option<Authority<'_>>,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
    if binding.loopback && !host.is_some_and(|h| h.is_loopback()) {
        return Err((
            StatusCode::FORBIDDEN,
            "the Host header must name this machine (localhost or 127.0.0.1)",
        ));
    }
    let safe = !any_method && matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if let Some(origin) = headers.get(header::ORIGIN)
        && !safe
    {
        let origin = origin.to_str().ok().and_then(|origin| {
            origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
        });
        let same_origin = matches!(
            (origin.and_then(Authority::parse), host),
            (Some(origin), Some(host)) if origin == host
        );
        if !same_origin {
            return Err((
                StatusCode::FORBIDDEN,
                if any_method {
                    "requests from another origin are refused here"
                } else {
                    "cross-origin requests may not change state"
                },
            ));
        }
    }
    Ok(())
}

/// A Host header's value (or an origin's after its scheme): a name or address, and a port.
#[derive(Debug, Clone, Copy)]
struct Authority<'a> {
    /// Without the brackets of an IPv6 address.
    name: &'a str,
    port: Option<u16>,
}

impl<'a> Authority<'a> {
    fn parse(text: &'a str) -> Option<Self> {
        let (name, port) = match text.strip_prefix('[') {
            Some(rest) => {
                let (address, after) = rest.split_once(']')?;
                address.parse::<std::net::Ipv6Addr>().ok()?;
                (address, after)
            }
            None => match text.find(':') {
                Some(colon) => text.split_at(colon),
                None => (text, ""),
            },
        };
        let port = match port.strip_prefix(':') {
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                Some(digits.parse().ok()?)
            }
            Some(_) => return None,
            None if port.is_empty() => None,
            None => return None,
        };
        let plain = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':');
        (!name.is_empty() && name.bytes().all(plain)).then_some(Self { name, port })
    }

    /// `localhost`, a 127.0.0.0/8 address or `::1`.
    fn is_loopback(self) -> bool {
        self.name.eq_ignore_ascii_case("localhost")
            || self.name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

impl PartialEq for Authority<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.name.eq_ignore_ascii_case(other.name) && self.port == other.port
    }
}

/// `/api/adapters/<name>/<anything but enable or disable>`, the prefix itself included (a
/// `wasi:http` component's `/`).
pub fn is_component_route(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/api/adapters/") else {
        return false;
    };
    match rest.split_once('/') {
        Some((name, route)) => {
            let first = route.split('/').next().unwrap_or_default();
            !name.is_empty() && !service_contract::routes::HOST_SEGMENTS.contains(&first)
        }
        None => false,
    }
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
        assert!(is_component_route("/api/adapters/hello-http/"));
        assert!(!is_component_route("/api/adapters/teamchat/enable"));
        assert!(!is_component_route("/api/adapters/scheduler/disable"));
        assert!(!is_component_route("/api/adapters/teamchat/recordings"));
        assert!(!is_component_route("/api/adapters/teamchat/recordings/r1"));
        assert!(!is_component_route("/api/adapters/teamchat/shadow"));
        assert!(!is_component_route("/api/adapters"));
        assert!(!is_component_route("/api/adapters/teamchat"));
        assert!(!is_component_route("/api/agents/x/y"));
    }

    fn names_this_machine(host: &str) -> bool {
        unambiguous(&headers(host, None))
            .unwrap()
            .is_some_and(Authority::is_loopback)
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
            assert!(names_this_machine(ok), "{ok}");
        }
        for foreign in [
            "evil.example",
            "evil.example:8765",
            "127.0.0.1.evil.example",
            "10.0.0.1:8765",
            "[::2]:1",
        ] {
            assert!(!names_this_machine(foreign), "{foreign}");
        }
        for ambiguous in [
            "localhost:8765@evil.example",
            "localhost@evil.example",
            "localhost:8765/x",
            "localhost:8765:1",
            "localhost:",
            "localhost:99999",
            "[::1]x",
            "[::1",
            "local host",
            "",
        ] {
            let refused = unambiguous(&headers(ambiguous, None)).unwrap_err();
            assert_eq!(refused.0, StatusCode::BAD_REQUEST, "{ambiguous}");
        }
    }

    #[test]
    fn repeated_host_or_origin_is_a_bad_request() {
        let mut twice = headers("localhost:1", Some("http://localhost:1"));
        twice.append(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert_eq!(unambiguous(&twice).unwrap_err().0, StatusCode::BAD_REQUEST);
        let mut twice = headers("localhost:1", None);
        twice.append(header::HOST, HeaderValue::from_static("evil.example"));
        assert_eq!(unambiguous(&twice).unwrap_err().0, StatusCode::BAD_REQUEST);
    }

    fn checked(method: Method, headers: &HeaderMap) -> Result<(), Refusal> {
        check(
            LOOPBACK,
            &method,
            false,
            unambiguous(headers).unwrap(),
            headers,
        )
    }

    #[test]
    fn origin_must_match_host_for_state_changes() {
        let same = headers("127.0.0.1:8765", Some("http://127.0.0.1:8765"));
        let foreign = headers("127.0.0.1:8765", Some("https://evil.example"));
        assert!(checked(Method::POST, &same).is_ok());
        assert!(checked(Method::POST, &foreign).is_err());
        for other in [
            "null",
            "http://localhost:1@evil.example",
            "http://localhost:1/",
            "http://localhost:2",
        ] {
            let refused = checked(Method::DELETE, &headers("localhost:1", Some(other)));
            assert_eq!(refused.unwrap_err().0, StatusCode::FORBIDDEN, "{other}");
        }
        assert!(checked(Method::GET, &foreign).is_ok());
        assert!(checked(Method::POST, &headers("localhost:1", None)).is_ok());
        assert!(
            checked(
                Method::POST,
                &headers("LocalHost:1", Some("http://localhost:1"))
            )
            .is_ok()
        );
    }

    #[test]
    fn host_check_applies_only_on_loopback_binding() {
        let rebound = headers("evil.example:8765", None);
        let host = unambiguous(&rebound).unwrap();
        assert!(check(LOOPBACK, &Method::GET, false, host, &rebound).is_err());
        assert!(
            check(
                Binding { loopback: false },
                &Method::GET,
                false,
                host,
                &rebound
            )
            .is_ok()
        );
        assert!(check(LOOPBACK, &Method::GET, false, None, &HeaderMap::new()).is_err());
    }
}
