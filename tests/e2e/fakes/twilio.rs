//! A fake of a Twilio-compatible voice provider. Its REST side takes
//! `POST /2010-04-01/Accounts/{sid}/Calls.json` (form-encoded, HTTP Basic with the account's
//! SID and auth token) and answers like the Calls API. Its webhook side then plays the call
//! the way the provider does: form posts to the call's `Url`, signed with
//! `X-Twilio-Signature` (base64 HMAC-SHA1 of the public URL and the sorted parameters, keyed
//! by the auth token), each `<Gather input="speech">` answered with a scripted `SpeechResult`
//! posted to its `action`, and status callbacks. It also stands in for the reverse proxy: it
//! signs the public URL and delivers to the server's own address at the same path.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha1::Sha1;

use crate::support::spawn_fake;

pub const ACCOUNT_SID: &str = "AC00000000000000000000000000000001";
pub const AUTH_TOKEN: &str = "f4k3-auth-token-0123456789abcdef";
pub const FROM_NUMBER: &str = "+15005550006";
/// Where the provider believes the server is (behind a TLS proxy).
pub const PUBLIC_BASE: &str = "https://voice.example.test/base";

/// One `Calls.json` request (with the account's credentials; others are refused): its form.
#[derive(Debug, Clone)]
pub struct CallRequest {
    pub form: Vec<(String, String)>,
}

impl CallRequest {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.form
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

type Shared = Arc<Mutex<Vec<CallRequest>>>;

pub struct FakeTwilio {
    pub base: String,
    calls: Shared,
}

async fn create_call(
    State(calls): State<Shared>,
    Path(sid): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let auth = headers
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let form: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{ACCOUNT_SID}:{AUTH_TOKEN}"))
    );
    if sid != ACCOUNT_SID || auth != expected {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"code": 20003, "message": "Authenticate", "more_info": "https://www.twilio.com/docs/errors/20003", "status": 401})),
        )
            .into_response();
    }
    let mut calls = calls.lock().unwrap();
    calls.push(CallRequest { form });
    let call = &calls[calls.len() - 1];
    if call.field("To").is_none() || call.field("Url").is_none() {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"code": 21201, "message": "No 'To' number is specified", "status": 400})),
        )
            .into_response();
    }
    let n = calls.len();
    (
        StatusCode::CREATED,
        Json(json!({
            "sid": format!("CA{n:032}"),
            "account_sid": ACCOUNT_SID,
            "to": call.field("To"),
            "from": call.field("From"),
            "status": "queued",
            "direction": "outbound-api",
            "api_version": "2010-04-01",
        })),
    )
        .into_response()
}

impl FakeTwilio {
    pub async fn start() -> Self {
        let calls: Shared = Arc::default();
        let router = axum::Router::new()
            .route("/2010-04-01/Accounts/{sid}/Calls.json", post(create_call))
            .with_state(Arc::clone(&calls));
        Self {
            base: spawn_fake(router).await,
            calls,
        }
    }

    pub fn calls(&self) -> Vec<CallRequest> {
        self.calls.lock().unwrap().clone()
    }

    /// The settings of a voice adapter using this fake (the gate not included).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("SERVICE_VOICE_TWILIO_ACCOUNT_SID", ACCOUNT_SID.into()),
            ("SERVICE_VOICE_TWILIO_AUTH_TOKEN", AUTH_TOKEN.into()),
            ("SERVICE_VOICE_TWILIO_FROM_NUMBER", FROM_NUMBER.into()),
            ("SERVICE_VOICE_TWILIO_API_BASE", self.base.clone()),
            ("SERVICE_VOICE_PUBLIC_BASE_URL", PUBLIC_BASE.into()),
        ]
    }
}

/// `X-Twilio-Signature` of a request to `url` with form `params`, keyed by `token`.
pub fn signature(token: &str, url: &str, params: &[(&str, &str)]) -> String {
    let mut sorted = params.to_vec();
    sorted.sort();
    let mut text = url.to_owned();
    for (name, value) in sorted {
        text.push_str(name);
        text.push_str(value);
    }
    let mut mac = Hmac::<Sha1>::new_from_slice(token.as_bytes()).unwrap();
    mac.update(text.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// What a TwiML answer asks for.
#[derive(Debug, Default)]
pub struct Twiml {
    pub says: Vec<String>,
    /// The `action` of a `<Gather input="speech">`.
    pub gather: Option<String>,
    pub hangup: bool,
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// Reads the verbs this fake understands (`Say`, `Gather input="speech"`, `Hangup`).
pub fn read_twiml(xml: &str) -> Twiml {
    let mut twiml = Twiml {
        hangup: xml.contains("<Hangup/>"),
        ..Twiml::default()
    };
    let mut rest = xml;
    while let Some(start) = rest.find("<Say>") {
        let after = &rest[start + 5..];
        let end = after.find("</Say>").expect("an unclosed <Say>");
        twiml.says.push(unescape(&after[..end]));
        rest = &after[end..];
    }
    if let Some(gather) = xml.find("<Gather ") {
        let tag = &xml[gather..gather + xml[gather..].find('>').unwrap()];
        assert!(tag.contains(r#"input="speech""#), "{tag}");
        let action = tag
            .split(r#"action=""#)
            .nth(1)
            .expect("a Gather without action");
        twiml.gather = Some(unescape(&action[..action.find('"').unwrap()]));
    }
    twiml
}

/// The provider's side of calls to one server.
pub struct Provider {
    /// The server's own address, where the proxy delivers.
    pub server: String,
    pub token: String,
}

impl Provider {
    /// Posts `params` to a public URL, signed as the provider signs; answers the status and body.
    pub async fn post(&self, public_url: &str, params: &[(&str, &str)]) -> (StatusCode, String) {
        let signature = signature(&self.token, public_url, params);
        self.post_signed(public_url, params, Some(&signature)).await
    }

    pub async fn post_signed(
        &self,
        public_url: &str,
        params: &[(&str, &str)],
        signature: Option<&str>,
    ) -> (StatusCode, String) {
        let path = public_url
            .strip_prefix(PUBLIC_BASE)
            .unwrap_or_else(|| panic!("{public_url} is not under {PUBLIC_BASE}"));
        let mut request = reqwest::Client::new()
            .post(format!("{}{path}", self.server))
            .form(params);
        if let Some(signature) = signature {
            request = request.header("x-twilio-signature", signature);
        }
        let response = request.send().await.unwrap();
        (response.status(), response.text().await.unwrap())
    }

    /// Plays a placed call: answers it, says each of `speeches` in turn (an empty one is
    /// silence), follows the TwiML until it hangs up, then reports the call completed. Answers
    /// everything the server said.
    pub async fn converse(
        &self,
        call: &CallRequest,
        call_sid: &str,
        speeches: &[&str],
    ) -> Vec<Twiml> {
        let base = [
            ("CallSid", call_sid),
            ("AccountSid", ACCOUNT_SID),
            ("From", FROM_NUMBER),
            ("To", call.field("To").unwrap()),
            ("Direction", "outbound-api"),
            ("ApiVersion", "2010-04-01"),
        ];
        let status_url = call.field("StatusCallback").unwrap();
        self.status(status_url, &base, "ringing", None).await;
        let mut params = base.to_vec();
        params.push(("CallStatus", "in-progress"));
        let (status, body) = self.post(call.field("Url").unwrap(), &params).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mut heard = vec![read_twiml(&body)];
        for speech in speeches {
            let Some(action) = heard.last().unwrap().gather.clone() else {
                break;
            };
            let mut params = base.to_vec();
            params.push(("CallStatus", "in-progress"));
            if !speech.is_empty() {
                params.extend([("SpeechResult", *speech), ("Confidence", "0.92")]);
            }
            let (status, body) = self.post(&action, &params).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            heard.push(read_twiml(&body));
        }
        assert!(
            heard.last().unwrap().hangup,
            "the call did not end: {heard:?}"
        );
        self.status(status_url, &base, "completed", Some("47"))
            .await;
        heard
    }

    /// A status callback.
    pub async fn status(
        &self,
        url: &str,
        base: &[(&str, &str)],
        status: &str,
        duration: Option<&str>,
    ) {
        let mut params = base.to_vec();
        params.push(("CallStatus", status));
        if let Some(duration) = duration {
            params.push(("CallDuration", duration));
        }
        let (code, body) = self.post(url, &params).await;
        assert!(code.is_success(), "{code}: {body}");
    }
}
