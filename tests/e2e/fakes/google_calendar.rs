//! A fake of the Google Calendar API v3 and Google's OAuth token endpoint: `POST /token`
//! (`grant_type=refresh_token`, client credentials as HTTP Basic), and
//! `GET|POST /calendar/v3/calendars/{id}/events` (events.list with `singleEvents`, `timeMin`,
//! `timeMax` and `timeZone`; events.insert), answering in Google's JSON shapes and errors.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use chrono::{DateTime, NaiveDate};
use serde_json::{Value, json};

use crate::support::spawn_fake;

pub const CLIENT_ID: &str = "1234-fake.apps.googleusercontent.com";
pub const CLIENT_SECRET: &str = "GOCSPX-fake-client-secret";
pub const REFRESH_TOKEN: &str = "1//0fake-refresh-token";

#[derive(Default)]
struct Calendar {
    /// Instances as events.list with `singleEvents=true` returns them.
    events: Vec<Value>,
    /// The access token currently accepted (empty: none).
    valid_token: String,
    issued: u32,
    token_requests: u32,
    /// (calendar id, body) of every insert.
    inserted: Vec<(String, Value)>,
}

type Shared = Arc<Mutex<Calendar>>;

pub struct FakeGoogle {
    pub base: String,
    state: Shared,
}

impl FakeGoogle {
    pub async fn start(events: Vec<Value>) -> Self {
        let state: Shared = Arc::new(Mutex::new(Calendar {
            events,
            ..Calendar::default()
        }));
        let router = axum::Router::new()
            .route("/token", post(token))
            .route(
                "/calendar/v3/calendars/{calendar}/events",
                get(list).post(insert),
            )
            .with_state(Arc::clone(&state));
        Self {
            base: spawn_fake(router).await,
            state,
        }
    }

    /// The settings of a calendar adapter using this fake.
    pub fn env(&self, refresh_token: &str) -> Vec<(&'static str, String)> {
        vec![
            ("SERVICE_CALENDAR_GOOGLE_CLIENT_ID", CLIENT_ID.into()),
            (
                "SERVICE_CALENDAR_GOOGLE_CLIENT_SECRET",
                CLIENT_SECRET.into(),
            ),
            (
                "SERVICE_CALENDAR_GOOGLE_REFRESH_TOKEN",
                refresh_token.into(),
            ),
            (
                "SERVICE_CALENDAR_GOOGLE_API_BASE",
                format!("{}/calendar/v3", self.base),
            ),
            (
                "SERVICE_CALENDAR_GOOGLE_TOKEN_URL",
                format!("{}/token", self.base),
            ),
        ]
    }

    pub fn token_requests(&self) -> u32 {
        self.state.lock().unwrap().token_requests
    }

    pub fn inserted(&self) -> Vec<(String, Value)> {
        self.state.lock().unwrap().inserted.clone()
    }

    /// Revokes the access token handed out, as a password change would.
    pub fn revoke(&self) {
        self.state.lock().unwrap().valid_token.clear();
    }
}

fn google_error(status: StatusCode, message: &str) -> Response {
    let body = json!({"error": {"code": status.as_u16(), "message": message, "errors": [{"message": message, "domain": "global", "reason": "invalid"}]}});
    (status, Json(body)).into_response()
}

async fn token(State(state): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
    );
    let client_ok = headers
        .get("authorization")
        .is_some_and(|v| v.to_str().unwrap() == expected);
    let mut state = state.lock().unwrap();
    state.token_requests += 1;
    if !client_ok {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client", "error_description": "Unauthorized"})),
        )
            .into_response();
    }
    let grant_ok = form.get("grant_type").map(String::as_str) == Some("refresh_token");
    if !grant_ok || form.get("refresh_token").map(String::as_str) != Some(REFRESH_TOKEN) {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant", "error_description": "Token has been expired or revoked."})),
        )
            .into_response();
    }
    state.issued += 1;
    state.valid_token = format!("ya29.fake-access-{}", state.issued);
    Json(json!({
        "access_token": state.valid_token,
        "expires_in": 3599,
        "scope": "https://www.googleapis.com/auth/calendar",
        "token_type": "Bearer",
    }))
    .into_response()
}

fn authorized(state: &Calendar, headers: &HeaderMap) -> bool {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    !state.valid_token.is_empty() && bearer == Some(state.valid_token.as_str())
}

/// The local dates an event covers (an all-day end is exclusive), in `zone`.
fn dates(event: &Value, zone: chrono_tz::Tz) -> Option<(NaiveDate, NaiveDate)> {
    let end_of = |key: &str| -> Option<NaiveDate> {
        match event[key]["date"].as_str() {
            Some(date) => date.parse().ok(),
            None => Some(
                DateTime::parse_from_rfc3339(event[key]["dateTime"].as_str()?)
                    .ok()?
                    .with_timezone(&zone)
                    .date_naive(),
            ),
        }
    };
    let start = end_of("start")?;
    let mut end = end_of("end")?;
    if event["end"]["date"].is_string() {
        end = end.pred_opt()?;
    }
    Some((start, end))
}

async fn list(
    State(state): State<Shared>,
    Path(calendar): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let state = state.lock().unwrap();
    if !authorized(&state, &headers) {
        return google_error(
            StatusCode::UNAUTHORIZED,
            "Request had invalid authentication credentials.",
        );
    }
    if query.get("singleEvents").map(String::as_str) != Some("true") {
        return google_error(StatusCode::BAD_REQUEST, "singleEvents=true expected");
    }
    let zone: chrono_tz::Tz = query["timeZone"].parse().unwrap();
    let (Ok(min), Ok(max)) = (
        DateTime::parse_from_rfc3339(&query["timeMin"]),
        DateTime::parse_from_rfc3339(&query["timeMax"]),
    ) else {
        return google_error(StatusCode::BAD_REQUEST, "Bad Request");
    };
    let first = min.with_timezone(&zone).date_naive();
    let last = (max.with_timezone(&zone) - chrono::Duration::seconds(1)).date_naive();
    let items: Vec<Value> = state
        .events
        .iter()
        .filter(|e| e["organizer"]["email"] == calendar || calendar == "primary")
        .filter(|e| dates(e, zone).is_some_and(|(s, end)| s <= last && end >= first))
        .cloned()
        .collect();
    Json(json!({"kind": "calendar#events", "summary": calendar, "timeZone": zone.name(), "items": items}))
        .into_response()
}

async fn insert(
    State(state): State<Shared>,
    Path(calendar): Path<String>,
    headers: HeaderMap,
    Json(mut event): Json<Value>,
) -> Response {
    let mut state = state.lock().unwrap();
    if !authorized(&state, &headers) {
        return google_error(
            StatusCode::UNAUTHORIZED,
            "Request had invalid authentication credentials.",
        );
    }
    if event["start"].is_null() || event["end"].is_null() {
        return google_error(StatusCode::BAD_REQUEST, "Missing end time.");
    }
    state.inserted.push((calendar.clone(), event.clone()));
    let id = format!("fakeevent{}", state.inserted.len());
    event["id"] = json!(id);
    event["status"] = json!("confirmed");
    event["htmlLink"] = json!(format!("https://calendar.example/event?eid={id}"));
    event["organizer"] = json!({"email": calendar});
    state.events.push(event.clone());
    Json(event).into_response()
}
