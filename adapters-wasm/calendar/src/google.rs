//! The Google Calendar API (v3): events.list with `singleEvents` (Google expands recurrences)
//! and events.insert, authorized by an access token this component gets from the OAuth token
//! endpoint with the refresh token and keeps in kv until it expires. The client id and secret
//! go in as `{{basic:...}}`, filled in by the host; the refresh token is a form field, so it
//! is read here, and never logged or answered.

use jiff::Timestamp;
use jiff::civil::Date;
use serde_json::{Value, json};

use crate::agenda::{Day, Occurrence, Span};
use crate::http::send;
use crate::service::adapter::kv;
use crate::service::adapter::outbound_http::Response;
use crate::settings::{self, GOOGLE_CLIENT_ID, GOOGLE_CLIENT_SECRET, GOOGLE_REFRESH_TOKEN};

const TOKEN_KEY: &str = "google:access-token";
/// A token is dropped this long before Google says it expires, so none is used as it lapses.
const EXPIRY_MARGIN_SECS: u64 = 60;
const PAGE_SIZE: u32 = 250;
/// Pages of one day's events read at most.
const MAX_PAGES: usize = 4;

pub struct Google {
    pub api_base: String,
    pub token_url: String,
}

/// Google's error message from a JSON error body (`{"error": {"message"}}` from the API,
/// `{"error", "error_description"}` from the token endpoint), never the raw body.
fn error_of(response: &Response) -> String {
    let body: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    let error = &body["error"];
    let message = error["message"]
        .as_str()
        .or_else(|| error.as_str())
        .unwrap_or("no error message");
    match body["error_description"].as_str() {
        Some(description) => format!("{} ({message}: {description})", response.status),
        None => format!("{} ({message})", response.status),
    }
}

/// A short tag of a refresh token (not the token: a hash cut to 64 bits).
fn fingerprint(refresh_token: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    refresh_token.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

impl Google {
    /// The kept access token, or a fresh one from the token endpoint.
    fn token(&self, fresh: bool) -> Result<String, String> {
        let refresh = settings::get(GOOGLE_REFRESH_TOKEN)
            .ok_or_else(|| format!("{GOOGLE_REFRESH_TOKEN} is not set"))?;
        // A kept token is used only for the refresh token it came from (the operator may
        // have switched accounts since).
        let owner = fingerprint(&refresh);
        if !fresh
            && let Ok(Some(kept)) = kv::get(TOKEN_KEY)
            && let Some(token) = String::from_utf8_lossy(&kept).strip_prefix(&format!("{owner}:"))
        {
            return Ok(token.to_owned());
        }
        let form = guest_util::form_encode(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.as_str()),
        ]);
        let auth = format!("{{{{basic:{GOOGLE_CLIENT_ID}:{GOOGLE_CLIENT_SECRET}}}}}");
        let headers = [
            ("authorization", auth.as_str()),
            ("content-type", "application/x-www-form-urlencoded"),
            ("accept", "application/json"),
        ];
        let response = send("POST", &self.token_url, &headers, form)?;
        if response.status != 200 {
            return Err(format!(
                "Google refused to refresh the access token: {}; check {GOOGLE_CLIENT_ID}, \
                 {GOOGLE_CLIENT_SECRET} and {GOOGLE_REFRESH_TOKEN}",
                error_of(&response)
            ));
        }
        let answer: Value = serde_json::from_slice(&response.body)
            .map_err(|e| format!("the token endpoint answered something other than JSON: {e}"))?;
        let token = answer["access_token"]
            .as_str()
            .ok_or("the token endpoint answered without an access_token")?
            .to_owned();
        let lifetime = answer["expires_in"].as_u64().unwrap_or(0);
        if lifetime > EXPIRY_MARGIN_SECS {
            let ttl = (lifetime - EXPIRY_MARGIN_SECS) * 1000;
            // Best effort: without kv the next call refreshes again.
            let _ = kv::set(TOKEN_KEY, format!("{owner}:{token}").as_bytes(), Some(ttl));
        }
        Ok(token)
    }

    /// A request with the access token; on 401 (revoked or expired early) the token is
    /// refreshed once and the request sent again.
    fn call(&self, method: &str, url: &str, body: Option<&Value>) -> Result<Value, String> {
        let mut fresh = false;
        loop {
            let bearer = format!("Bearer {}", self.token(fresh)?);
            let mut headers = vec![
                ("authorization", bearer.as_str()),
                ("accept", "application/json"),
            ];
            if body.is_some() {
                headers.push(("content-type", "application/json"));
            }
            let payload = body.map(Value::to_string).unwrap_or_default();
            let response = send(method, url, &headers, payload)?;
            match response.status {
                200..=299 => {
                    return serde_json::from_slice(&response.body)
                        .map_err(|e| format!("Google answered something other than JSON: {e}"));
                }
                401 if !fresh => {
                    let _ = kv::delete(TOKEN_KEY);
                    fresh = true;
                }
                _ => {
                    return Err(format!(
                        "Google Calendar refused {method}: {}",
                        error_of(&response)
                    ));
                }
            }
        }
    }

    fn events_url(&self, calendar: &str) -> String {
        format!(
            "{}/calendars/{}/events",
            self.api_base.trim_end_matches('/'),
            guest_util::percent_encode(calendar)
        )
    }

    /// The day's events of `calendar`, instances of recurring ones included.
    pub fn day(&self, calendar: &str, day: &Day) -> Result<Vec<Occurrence>, String> {
        let mut found = Vec::new();
        let mut page: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut query = vec![
                ("singleEvents", "true".to_owned()),
                ("orderBy", "startTime".to_owned()),
                ("timeMin", day.start.to_string()),
                ("timeMax", day.end.to_string()),
                ("timeZone", crate::agenda::zone_name(&day.zone).to_owned()),
                ("maxResults", PAGE_SIZE.to_string()),
            ];
            if let Some(token) = &page {
                query.push(("pageToken", token.clone()));
            }
            let url = format!(
                "{}?{}",
                self.events_url(calendar),
                guest_util::form_encode(&query)
            );
            let answer = self.call("GET", &url, None)?;
            let items = answer["items"].as_array().cloned().unwrap_or_default();
            found.extend(items.iter().filter_map(|item| occurrence(item, calendar)));
            page = answer["nextPageToken"].as_str().map(str::to_owned);
            if page.is_none() {
                break;
            }
        }
        Ok(found)
    }

    /// Inserts an event; answers the created event's id and link.
    pub fn insert(&self, calendar: &str, event: &Value) -> Result<Value, String> {
        let created = self.call("POST", &self.events_url(calendar), Some(event))?;
        Ok(json!({ "id": created["id"], "link": created["htmlLink"] }))
    }
}

/// An events.list item as an occurrence; cancelled ones and unreadable ones are left out.
fn occurrence(item: &Value, calendar: &str) -> Option<Occurrence> {
    if item["status"] == "cancelled" {
        return None;
    }
    let span = match (item["start"]["date"].as_str(), item["end"]["date"].as_str()) {
        (Some(first), Some(end)) => {
            let first: Date = first.parse().ok()?;
            // Google's end date is exclusive.
            let end: Date = end.parse().ok()?;
            Span::AllDay {
                first,
                last: end
                    .yesterday()
                    .ok()
                    .filter(|d| *d >= first)
                    .unwrap_or(first),
            }
        }
        _ => {
            let start: Timestamp = item["start"]["dateTime"].as_str()?.parse().ok()?;
            let end: Timestamp = item["end"]["dateTime"].as_str()?.parse().ok()?;
            Span::Timed { start, end }
        }
    };
    let text = |key: &str| item[key].as_str().unwrap_or_default().to_owned();
    Some(Occurrence {
        summary: text("summary"),
        description: text("description"),
        location: text("location"),
        calendar: calendar.to_owned(),
        span,
        recurring: item["recurringEventId"].is_string(),
    })
}

/// An events.insert body for a span (all-day ends are exclusive, as Google wants).
pub fn event_body(
    summary: &str,
    description: &str,
    location: &str,
    span: &Span,
    zone: &str,
) -> Value {
    let (start, end) = match span {
        Span::AllDay { first, last } => (
            json!({ "date": first.to_string() }),
            json!({ "date": last.tomorrow().unwrap_or(*last).to_string() }),
        ),
        Span::Timed { start, end } => (
            json!({ "dateTime": start.to_string(), "timeZone": zone }),
            json!({ "dateTime": end.to_string(), "timeZone": zone }),
        ),
    };
    let mut body = json!({ "summary": summary, "start": start, "end": end });
    if !description.is_empty() {
        body["description"] = json!(description);
    }
    if !location.is_empty() {
        body["location"] = json!(location);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_list_items() {
        let timed = json!({"id": "e1", "status": "confirmed", "summary": "Lunch",
            "start": {"dateTime": "2026-11-23T12:00:00+01:00"},
            "end": {"dateTime": "2026-11-23T13:00:00+01:00"}, "recurringEventId": "r1"});
        let found = occurrence(&timed, "primary").unwrap();
        assert!(found.recurring);
        assert_eq!(
            found.span,
            Span::Timed {
                start: "2026-11-23T11:00:00Z".parse().unwrap(),
                end: "2026-11-23T12:00:00Z".parse().unwrap()
            }
        );
        let all_day = json!({"summary": "Trip", "start": {"date": "2026-11-22"}, "end": {"date": "2026-11-25"}});
        assert_eq!(
            occurrence(&all_day, "primary").unwrap().span,
            Span::AllDay {
                first: "2026-11-22".parse().unwrap(),
                last: "2026-11-24".parse().unwrap()
            }
        );
        assert!(occurrence(&json!({"status": "cancelled"}), "primary").is_none());
        assert!(occurrence(&json!({"start": {}}), "primary").is_none());
    }

    #[test]
    fn writes_insert_bodies() {
        let day: Date = "2026-11-23".parse().unwrap();
        let body = event_body(
            "Off",
            "",
            "",
            &Span::AllDay {
                first: day,
                last: day,
            },
            "UTC",
        );
        assert_eq!(body["end"]["date"], "2026-11-24");
        assert!(body.get("location").is_none());
        let start: Timestamp = "2026-11-23T18:00:00Z".parse().unwrap();
        let span = Span::Timed { start, end: start };
        let body = event_body("Dinner", "Table 4", "Chez Nous", &span, "Europe/Paris");
        assert_eq!(body["start"]["dateTime"], "2026-11-23T18:00:00Z");
        assert_eq!(body["start"]["timeZone"], "Europe/Paris");
        assert_eq!(body["location"], "Chez Nous");
    }
}
