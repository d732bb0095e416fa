//! The one policy of every import that sends HTTP (`outbound-http` and `wasi:http`): only
//! granted origins, checked again on every redirect hop (followed by hand, or handed back to
//! the guest, whose next request is checked), local and private addresses refused unless the
//! grant names that address itself, `{{secret:NAME}}` and `{{basic:USER:PASSWORD}}` header
//! placeholders filled for each hop's origin after the checks (and dropped when a redirect
//! leaves the origin), timeouts, and caps on the request and response sizes.

use std::collections::BTreeSet;
use std::time::Duration;

use reqwest::redirect::Policy;
use reqwest::{Method, StatusCode, Url};

use super::grants::Origin;
use crate::net::{self, Guard, MAX_REDIRECTS};
use crate::placeholders;
use crate::telemetry::{TARGET, propagation};
use tracing::Instrument;
use tracing::field::Empty;

pub(crate) const MAX_RESPONSE: usize = 4 * 1024 * 1024;
/// A request body a guest streams (`wasi:http`) is held until it ends, up to this.
pub(crate) const MAX_REQUEST: usize = 4 * 1024 * 1024;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub timeout_ms: Option<u32>,
    /// Follow redirects (each hop checked), or answer the redirect itself as `wasi:http`
    /// does.
    pub follow_redirects: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Why a request was not sent or failed. `Denied` is a capability violation the caller records
/// on the adapter's registry entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    #[error("{0}")]
    Denied(String),
    /// The request itself is malformed.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Failed(String),
}

/// A client for one component generation's grant.
pub struct Outbound {
    client: reqwest::Client,
    guard: Guard,
}

impl Outbound {
    /// Granted origins whose host is an IP address or `localhost` may be local: the operator
    /// named that address. A granted DNS name must still resolve to public addresses.
    pub fn new(origins: &BTreeSet<Origin>) -> anyhow::Result<Self> {
        let local_by_name = origins
            .iter()
            .filter(|o| {
                o.host == "localhost"
                    || o.host
                        .trim_matches(['[', ']'])
                        .parse::<std::net::IpAddr>()
                        .is_ok()
            })
            .map(|o| o.host.clone());
        let guard = Guard::new(local_by_name);
        let client = guard.client_builder().redirect(Policy::none()).build()?;
        Ok(Self { client, guard })
    }

    /// Sends `request` to granted `origins`. `secret` answers a placeholder's secret for the
    /// origin it is about to go to, or why not.
    pub async fn send(
        &self,
        origins: &BTreeSet<Origin>,
        secret: impl Fn(&str, &Origin) -> Result<String, Failure>,
        request: Request,
    ) -> Result<Response, Failure> {
        let mut method = Method::from_bytes(request.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| Failure::Invalid(format!("invalid method {:?}", request.method)))?;
        let mut url = Url::parse(&request.url)
            .map_err(|e| Failure::Invalid(format!("invalid URL {:?}: {e}", request.url)))?;
        // Templates: placeholders are filled for each hop's origin.
        let mut headers = request.headers;
        let mut body = request.body;
        let timeout = request
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, |ms| Duration::from_millis(ms.into()))
            .min(MAX_TIMEOUT);

        for _ in 0..=MAX_REDIRECTS {
            let origin = self.check(origins, &url)?;
            let mut builder = self
                .client
                .request(method.clone(), url.clone())
                .timeout(timeout);
            for (name, value) in &headers {
                let value = placeholders::fill(
                    value,
                    |name| secret(name, &origin),
                    |m| Failure::Invalid(m.to_owned()),
                )?;
                builder = builder.header(name, value);
            }
            let span = tracing::info_span!(
                target: TARGET,
                "outbound",
                otel.name = %method,
                otel.kind = "client",
                http.request.method = %method,
                server.address = %origin.host,
                url.full = %without_secrets(&url),
                http.response.status_code = Empty,
                "error.type" = Empty,
                otel.status_code = Empty,
            );
            // The request's span goes on at the other end (when traces are exported).
            let builder = builder.headers(span.in_scope(propagation::headers));
            let sent = builder
                .body(body.clone())
                .send()
                .instrument(span.clone())
                .await;
            let response = sent.map_err(|e| {
                span.record("error.type", "transport");
                span.record("otel.status_code", "error");
                if net::refused_by_guard(&e) {
                    Failure::Denied(net::describe(e))
                } else {
                    Failure::Failed(net::describe(e))
                }
            })?;
            let status = response.status();
            span.record("http.response.status_code", i64::from(status.as_u16()));
            if status.is_redirection()
                && request.follow_redirects
                && let Some(location) = response.headers().get(reqwest::header::LOCATION)
            {
                let location = location.to_str().map_err(|_| {
                    Failure::Failed("a redirect with an unreadable Location".into())
                })?;
                url = url
                    .join(location)
                    .map_err(|e| Failure::Failed(format!("bad redirect {location:?}: {e}")))?;
                // Credentials stay with the origin they were meant for.
                if Origin::of(&url).as_ref() != Some(&origin) {
                    headers.retain(|(_, value)| !placeholders::has_placeholder(value));
                }
                // 303, and 301/302 after a POST, continue as a GET without a body (as browsers do).
                if status == StatusCode::SEE_OTHER
                    || (method == Method::POST
                        && matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND))
                {
                    method = Method::GET;
                    body.clear();
                }
                continue;
            }
            let response_headers = response
                .headers()
                .iter()
                .filter_map(|(name, value)| {
                    Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
                })
                .collect();
            let body = net::body_capped(response, MAX_RESPONSE)
                .await
                .map_err(Failure::Failed)?;
            return Ok(Response {
                status: status.as_u16(),
                headers: response_headers,
                body,
            });
        }
        Err(Failure::Failed(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }

    /// The URL's origin, when it is granted and its address allowed.
    fn check(&self, origins: &BTreeSet<Origin>, url: &Url) -> Result<Origin, Failure> {
        let origin =
            Origin::of(url).ok_or_else(|| Failure::Invalid(format!("{url} has no host")))?;
        if !origins.contains(&origin) {
            return Err(Failure::Denied(format!(
                "outbound request to {origin} is not granted"
            )));
        }
        self.guard.check_url(url).map_err(Failure::Denied)?;
        Ok(origin)
    }
}

/// A URL as a span shows it: no user, password, query or fragment, which may hold secrets.
fn without_secrets(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::http::HeaderMap;
    use axum::response::Redirect;
    use axum::routing::get;

    use super::*;

    async fn serve(router: Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        format!("http://{addr}")
    }

    fn get_request(url: String) -> Request {
        Request {
            method: "GET".into(),
            url,
            headers: vec![("authorization".into(), "Bearer {{secret:TOKEN}}".into())],
            body: vec![],
            timeout_ms: None,
            follow_redirects: true,
        }
    }

    async fn auth(headers: HeaderMap) -> String {
        headers
            .get("authorization")
            .map_or("none", |v| v.to_str().unwrap())
            .to_owned()
    }

    #[tokio::test]
    async fn follows_granted_redirects_and_keeps_secrets_with_their_origin() {
        let other = serve(Router::new().route("/x", get(auth))).await;
        let to_other = format!("{other}/x");
        let base = serve(
            Router::new()
                .route("/ok", get(auth))
                .route("/hop", get(|| async { Redirect::temporary("/ok") }))
                .route(
                    "/away",
                    get(|| async { Redirect::temporary("http://127.0.0.2:9/x") }),
                )
                .route(
                    "/other",
                    get(move || async move { Redirect::temporary(&to_other) }),
                )
                .route("/big", get(|| async { vec![b'x'; MAX_RESPONSE + 1] })),
        )
        .await;
        let origins = Origin::parse_all([&base, &other]).unwrap();
        let outbound = Outbound::new(&origins).unwrap();
        let home = Origin::parse(&base).unwrap();
        let secret = |name: &str, origin: &Origin| match name {
            "TOKEN" if *origin == home => Ok("t0k".to_owned()),
            _ => Err(Failure::Denied(format!("{name} may not go to {origin}"))),
        };

        let answer = outbound
            .send(&origins, secret, get_request(format!("{base}/hop")))
            .await
            .unwrap();
        assert_eq!((answer.status, answer.body), (200, b"Bearer t0k".to_vec()));
        let crossed = outbound
            .send(&origins, secret, get_request(format!("{base}/other")))
            .await
            .unwrap();
        assert_eq!(
            crossed.body,
            b"none".to_vec(),
            "the credential stayed with its origin"
        );
        let direct = outbound
            .send(&origins, secret, get_request(format!("{other}/x")))
            .await;
        assert!(matches!(direct, Err(Failure::Denied(m)) if m.contains("may not go")));
        let away = outbound
            .send(&origins, secret, get_request(format!("{base}/away")))
            .await;
        assert!(matches!(away, Err(Failure::Denied(m)) if m.contains("127.0.0.2")));
        let big = outbound
            .send(&origins, secret, get_request(format!("{base}/big")))
            .await;
        assert!(matches!(big, Err(Failure::Failed(m)) if m.contains("larger than")));
        let ungranted = outbound
            .send(&origins, secret, get_request("http://127.0.0.1:1/".into()))
            .await;
        assert!(matches!(ungranted, Err(Failure::Denied(m)) if m.contains("not granted")));
    }
}
