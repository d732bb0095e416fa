//! Single sign-on against a real OpenID provider: the certified `oidc-provider` package
//! (npm), started from `tests/fixtures/oidc`. The browser test in `browser.rs` signs in through
//! it in Chromium; these drive what an attacker would try at the callback.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use reqwest::StatusCode;
use reqwest::header;
use serde_json::Value;

use crate::access::REQUIRED;
use crate::support::{Server, eventually, tool_available};

pub(crate) const CLIENT_SECRET: &str = "a-client-secret-for-tests-only";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/oidc")
}

/// The provider, killed when dropped.
pub(crate) struct Provider {
    child: Child,
    pub issuer: String,
    /// The provider's stderr, for a failing test to show.
    pub log: tempfile::NamedTempFile,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Provider {
    /// `None` (skipped) when the fixture's packages are not installed, outside CI.
    pub fn start() -> Option<Self> {
        let installed = fixture().join("node_modules/oidc-provider").is_dir();
        if !tool_available(
            installed,
            "SINGLE SIGN-ON TESTS SKIPPED: run `npm install` in tests/fixtures/oidc",
        ) {
            return None;
        }
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new("node")
            .arg(fixture().join("provider.mjs"))
            .arg(CLIENT_SECRET)
            .stdout(Stdio::piped())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        let mut issuer = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut issuer).unwrap();
        // Kept open: a provider writing to a closed pipe would die of it.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let issuer = issuer.trim().to_owned();
        assert!(issuer.starts_with("http://127.0.0.1:"), "{issuer:?}");
        Some(Self { child, issuer, log })
    }

    /// config.toml of a server that signs people in through this provider.
    pub fn config(&self) -> String {
        format!(
            "{REQUIRED}\n[auth.oidc]\nissuer = \"{}\"\nclient_id = \"service-runtime\"\n\
             scopes = [\"openid\", \"profile\", \"email\", \"groups\"]\nlabel = \"Sign in with Test ID\"\n\
             [auth.oidc.roles]\nsre = \"operator\"\nstaff = \"member\"\n",
            self.issuer
        )
    }
}

pub(crate) fn secret_env() -> Vec<(&'static str, String)> {
    vec![("SERVICE_OIDC_CLIENT_SECRET", CLIENT_SECRET.into())]
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Starts a sign-in: the provider's address and the cookie that binds its state.
async fn begin(server: &Server, next: &str) -> (StatusCode, String, String) {
    let response = no_redirects()
        .get(server.url("/api/session/oidc"))
        .query(&[("next", next)])
        .send()
        .await
        .unwrap();
    let status = response.status();
    let location = response
        .headers()
        .get(header::LOCATION)
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let cookie = response
        .headers()
        .get(header::SET_COOKIE)
        .map(|c| c.to_str().unwrap().split(';').next().unwrap().to_owned())
        .unwrap_or_default();
    (status, location, cookie)
}

async fn callback(server: &Server, query: &str, cookie: Option<&str>) -> (StatusCode, Value) {
    let mut request =
        no_redirects().get(server.url(&format!("/api/session/oidc/callback?{query}")));
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    let response = request.send().await.unwrap();
    (
        response.status(),
        response.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn forged_replayed_or_foreign_callbacks_and_open_redirects_are_refused_and_audited() {
    let Some(provider) = Provider::start() else {
        return;
    };
    let server = Server::start_with_config(&provider.config(), &secret_env());
    // Single sign-on is a way in: no first-admin link.
    let printed =
        std::fs::read_to_string(server.data_dir.join("server.stdout")).unwrap_or_default();
    assert!(!printed.contains("#link="), "{printed}");
    let me: Value = reqwest::get(server.url("/api/me"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["single_sign_on"], "Sign in with Test ID");

    let (status, location, cookie) = begin(&server, "/#/agents").await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        location.starts_with(&format!("{}/auth?", provider.issuer)),
        "{location}"
    );
    let url = url::Url::parse(&location).unwrap();
    let param = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    assert_eq!(param("code_challenge_method"), "S256");
    assert_eq!(param("response_type"), "code");
    assert!(param("nonce").len() >= 16 && param("state").len() >= 16);
    assert!(param("redirect_uri").ends_with("/api/session/oidc/callback"));
    assert!(param("scope").contains("groups"));
    let state = param("state");
    assert_eq!(cookie, format!("service_sign_in={state}"));

    // Another browser (no cookie, or another's): refused, and the sign-in stays usable.
    let (status, body) = callback(&server, &format!("code=x&state={state}"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("not started in this browser")
    );
    let (status, _) = callback(
        &server,
        &format!("code=x&state={state}"),
        Some("service_sign_in=other"),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A forged code: the provider does not take it, and the sign-in is used up.
    let (status, body) = callback(
        &server,
        &format!("code=forged&state={state}"),
        Some(&cookie),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("did not take the code"),
        "{body}"
    );
    let (status, body) = callback(
        &server,
        &format!("code=forged&state={state}"),
        Some(&cookie),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("unknown, used or expired"),
        "{body}"
    );
    // The provider's own refusal, and a callback without its parameters.
    let (status, body) = callback(
        &server,
        "error=access_denied&error_description=no",
        Some(&cookie),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body["error"].as_str().unwrap().contains("access_denied"));
    let (status, _) = callback(&server, "", Some(&cookie)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // Where to go next stays on this server.
    for next in ["https://evil.example/", "//evil.example", "/\\evil.example"] {
        let (status, location, _) = begin(&server, next).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{next}");
        assert!(location.is_empty());
    }

    let admin = crate::access::token(&server, "auditor", "admin");
    let audit = eventually(10, async || {
        let path = "/api/audit?action=single%20sign-on";
        let (_, answer) = crate::access::get_as(&server, path, &admin).await;
        (answer["total"] == 6).then_some(answer)
    })
    .await;
    assert!(
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["principal"].is_null()),
        "{audit}"
    );
    let text = audit.to_string();
    assert!(!text.contains(&state) && !text.contains(CLIENT_SECRET));
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(!log.contains(CLIENT_SECRET));
}

#[tokio::test]
async fn a_provider_whose_issuer_is_not_the_configured_one_is_refused() {
    let Some(provider) = Provider::start() else {
        return;
    };
    // The same provider named by another host: its discovery document names another issuer.
    let config = provider.config().replace(
        &provider.issuer,
        &provider.issuer.replace("127.0.0.1", "localhost"),
    );
    let server = Server::start_with_config(&config, &secret_env());
    let (status, _, _) = begin(&server, "/").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

/// Each start keeps a row and asks the provider: one address gets the sign-in attempts of a
/// minute (30), then 429, with nothing more kept, while the server answers everyone else.
#[tokio::test]
async fn a_flood_of_sign_in_starts_is_bounded() {
    let Some(provider) = Provider::start() else {
        return;
    };
    let server = Server::start_with_config(&provider.config(), &secret_env());
    let mut refused = None;
    for _ in 0..61 {
        let (status, _, _) = begin(&server, "/").await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(status);
            break;
        }
        assert_eq!(status, StatusCode::SEE_OTHER);
    }
    // Within 30 starts, or 60 when a minute of the clock turned meanwhile.
    assert_eq!(refused, Some(StatusCode::TOO_MANY_REQUESTS));
    let kept: i64 = server
        .db()
        .blocking(|conn| {
            conn.query_one(
                "SELECT count(*) FROM sign_in_flows",
                service_runtime::params![],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert!((30..=60).contains(&kept), "{kept}");
    let (status, _, _) = begin(&server, "/").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let (status, _) = server.get("/api/health").await;
    assert_eq!(status, StatusCode::OK);
}
