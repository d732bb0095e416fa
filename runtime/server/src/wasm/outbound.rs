//! The `outbound-http` capability's policy: only granted origins, checked again on every
//! redirect hop (followed by hand), local and private addresses refused unless the grant names
//! that address itself, `{{secret:NAME}}` header placeholders filled after the checks, and a
//! cap on the response size.

use std::time::Duration;

use reqwest::redirect::Policy;
use reqwest::{Method, StatusCode, Url};

use super::grants::{Effective, Origin};
use crate::net::{self, Guard};

const MAX_REDIRECTS: usize = 5;
const MAX_RESPONSE: usize = 4 * 1024 * 1024;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub timeout_ms: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Why a request was not sent or failed. `Denied` is a capability violation the caller records
/// on the adapter's registry entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    #[error("{0}")]
    Denied(String),
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
    pub fn new(effective: &Effective) -> anyhow::Result<Self> {
        let local_by_name = effective
            .origins
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

    /// Sends `request`. `secret` answers granted secrets only.
    pub async fn send(
        &self,
        effective: &Effective,
        secret: impl Fn(&str) -> Result<String, Failure>,
        request: Request,
    ) -> Result<Response, Failure> {
        let mut method = Method::from_bytes(request.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| Failure::Failed(format!("invalid method {:?}", request.method)))?;
        let mut url = Url::parse(&request.url)
            .map_err(|e| Failure::Failed(format!("invalid URL {:?}: {e}", request.url)))?;
        let mut headers = Vec::with_capacity(request.headers.len());
        for (name, value) in &request.headers {
            headers.push((name.clone(), fill_secrets(value, &secret)?));
        }
        let mut body = request.body;
        let timeout = request
            .timeout_ms
            .map_or(DEFAULT_TIMEOUT, |ms| Duration::from_millis(ms.into()))
            .min(MAX_TIMEOUT);

        for _ in 0..=MAX_REDIRECTS {
            self.check(effective, &url)?;
            let mut builder = self
                .client
                .request(method.clone(), url.clone())
                .timeout(timeout);
            for (name, value) in &headers {
                builder = builder.header(name, value);
            }
            let response = builder.body(body.clone()).send().await.map_err(|e| {
                if net::refused_by_guard(&e) {
                    Failure::Denied(net::describe(e))
                } else {
                    Failure::Failed(net::describe(e))
                }
            })?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(reqwest::header::LOCATION)
            {
                let location = location.to_str().map_err(|_| {
                    Failure::Failed("a redirect with an unreadable Location".into())
                })?;
                url = url
                    .join(location)
                    .map_err(|e| Failure::Failed(format!("bad redirect {location:?}: {e}")))?;
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

    fn check(&self, effective: &Effective, url: &Url) -> Result<(), Failure> {
        let origin =
            Origin::of(url).ok_or_else(|| Failure::Denied(format!("{url} has no host")))?;
        if !effective.origins.contains(&origin) {
            return Err(Failure::Denied(format!(
                "outbound request to {}://{}:{} is not granted",
                origin.scheme, origin.host, origin.port
            )));
        }
        self.guard.check_url(url).map_err(Failure::Denied)
    }
}

/// Replaces each `{{secret:NAME}}` in a header value.
fn fill_secrets(
    value: &str,
    secret: &impl Fn(&str) -> Result<String, Failure>,
) -> Result<String, Failure> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("{{secret:") {
        out.push_str(&rest[..start]);
        let after = &rest[start + "{{secret:".len()..];
        let end = after
            .find("}}")
            .ok_or_else(|| Failure::Failed("unterminated {{secret:...}} placeholder".into()))?;
        out.push_str(&secret(&after[..end])?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::http::HeaderMap;
    use axum::response::Redirect;
    use axum::routing::get;

    use super::super::grants::{Grant, Request as Asked};
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
        }
    }

    #[tokio::test]
    async fn follows_granted_redirects_and_refuses_the_rest() {
        let base =
            serve(
                Router::new()
                    .route(
                        "/ok",
                        get(|h: HeaderMap| async move {
                            h["authorization"].to_str().unwrap().to_owned()
                        }),
                    )
                    .route("/hop", get(|| async { Redirect::temporary("/ok") }))
                    .route(
                        "/away",
                        get(|| async { Redirect::temporary("http://127.0.0.2:9/x") }),
                    )
                    .route("/big", get(|| async { vec![b'x'; MAX_RESPONSE + 1] })),
            )
            .await;
        let asked = Asked {
            outbound_hosts: vec![base.clone()],
            ..Asked::default()
        };
        let effective = Effective::intersect(
            &asked,
            &Grant {
                outbound_hosts: vec![base.clone()],
                ..Grant::default()
            },
        )
        .unwrap();
        let outbound = Outbound::new(&effective).unwrap();
        let secret = |name: &str| {
            if name == "TOKEN" {
                Ok("t0k".to_owned())
            } else {
                Err(Failure::Denied(name.to_owned()))
            }
        };

        let answer = outbound
            .send(&effective, secret, get_request(format!("{base}/hop")))
            .await
            .unwrap();
        assert_eq!((answer.status, answer.body), (200, b"Bearer t0k".to_vec()));
        let away = outbound
            .send(&effective, secret, get_request(format!("{base}/away")))
            .await;
        assert!(matches!(away, Err(Failure::Denied(m)) if m.contains("127.0.0.2")));
        let big = outbound
            .send(&effective, secret, get_request(format!("{base}/big")))
            .await;
        assert!(matches!(big, Err(Failure::Failed(m)) if m.contains("larger than")));
        let ungranted = outbound
            .send(
                &effective,
                secret,
                get_request("http://127.0.0.1:1/".into()),
            )
            .await;
        assert!(matches!(ungranted, Err(Failure::Denied(m)) if m.contains("not granted")));
    }

    #[test]
    fn placeholders_are_filled_from_granted_secrets_only() {
        let secret = |name: &str| match name {
            "TOKEN" => Ok("xoxb-1".to_owned()),
            other => Err(Failure::Denied(format!("secret {other} is not granted"))),
        };
        assert_eq!(
            fill_secrets("Bearer {{secret:TOKEN}}", &secret).unwrap(),
            "Bearer xoxb-1"
        );
        assert_eq!(fill_secrets("plain", &secret).unwrap(), "plain");
        assert!(matches!(
            fill_secrets("{{secret:OTHER}}", &secret),
            Err(Failure::Denied(_))
        ));
        assert!(matches!(
            fill_secrets("{{secret:TOKEN", &secret),
            Err(Failure::Failed(_))
        ));
    }
}
