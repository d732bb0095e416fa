//! The bundled calendar component through the real binary, its tools called by a scripted
//! model: against a real Radicale (events created through the tool land in Radicale's storage;
//! recurring, all-day and excluded events; a wrong password), against a fake of the Google
//! Calendar API (token refresh kept in kv, a revoked token, a refused refresh token), the
//! write gate, and Atlas listing the day's events.

use chrono::{Duration, FixedOffset, NaiveDate, TimeZone, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::google_calendar::{self, FakeGoogle};
use crate::fakes::llm::{self, Reply};
use crate::radicale::{self, Radicale};
use crate::support::{Server, eventually, openai_env};

/// A fixed-offset zone where it is now between 12:00 and 13:00, so "today" cannot end while
/// a test runs; its IANA name and offset.
fn noon_zone() -> (String, FixedOffset) {
    let hour = i32::try_from(Utc::now().format("%H").to_string().parse::<u32>().unwrap()).unwrap();
    let offset = 12 - hour;
    // `Etc/GMT-3` is three hours ahead of UTC (the sign is POSIX's).
    let name = match offset {
        0 => "Etc/GMT".to_owned(),
        o if o > 0 => format!("Etc/GMT-{o}"),
        o => format!("Etc/GMT+{}", -o),
    };
    (name, FixedOffset::east_opt(offset * 3600).unwrap())
}

struct Clock {
    zone: String,
    offset: FixedOffset,
    today: NaiveDate,
}

impl Clock {
    fn new() -> Self {
        let (zone, offset) = noon_zone();
        let today = Utc::now().with_timezone(&offset).date_naive();
        Self {
            zone,
            offset,
            today,
        }
    }

    fn day(&self, days: i64) -> NaiveDate {
        self.today + Duration::days(days)
    }

    /// Local `hour:00` of a day as an iCalendar UTC value.
    fn utc(&self, days: i64, hour: u32) -> String {
        let local = self.day(days).and_hms_opt(hour, 0, 0).unwrap();
        let instant = self.offset.from_local_datetime(&local).unwrap();
        instant
            .with_timezone(&Utc)
            .format("%Y%m%dT%H%M%SZ")
            .to_string()
    }

    /// Local `hour:00` today as the tool shows it.
    fn shown(&self, hour: u32) -> String {
        let local = self.today.and_hms_opt(hour, 0, 0).unwrap();
        self.offset
            .from_local_datetime(&local)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
    }

    /// Local `hour:00` of a day as an RFC 3339 UTC value.
    fn utc_iso(&self, days: i64, hour: u32) -> String {
        let local = self.day(days).and_hms_opt(hour, 0, 0).unwrap();
        let instant = self.offset.from_local_datetime(&local).unwrap();
        instant
            .with_timezone(&Utc)
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    }

    fn date(&self, days: i64) -> String {
        self.day(days).format("%Y%m%d").to_string()
    }
}

fn ics(uid: &str, summary: &str, lines: &[String]) -> String {
    format!(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//tests//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\nDTSTAMP:20260101T000000Z\r\nSUMMARY:{summary}\r\n{}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
        lines.join("\r\n")
    )
}

/// A scripted model turn that calls `tool` with `input`, then answers.
fn calls(tool: &'static str, input: Value) -> [Reply; 2] {
    [Reply::Tools(vec![("t1", tool, input)]), Reply::Text("done")]
}

/// Runs one chat whose scripted model calls a tool; answers the tool call's record.
async fn tool_call(server: &Server, agent: &str) -> Value {
    let (status, answer) = server
        .post(
            "/api/chat",
            json!({"prompt": "check my calendar", "agent": agent}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["tool_calls"][0].clone()
}

fn output(call: &Value) -> Value {
    let text = call["output"]
        .as_str()
        .unwrap_or_else(|| panic!("the tool failed: {call}"));
    serde_json::from_str(text).unwrap()
}

fn summaries(listed: &Value) -> Vec<String> {
    listed["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["summary"].as_str().unwrap().to_owned())
        .collect()
}

async fn tool_names(server: &Server) -> Vec<String> {
    let (_, body) = server.get("/api/tools").await;
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn caldav_env(radicale: &Radicale, password: &str, zone: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SERVICE_CALENDAR_CALDAV_URL", radicale.home()),
        ("SERVICE_CALENDAR_CALDAV_USER", radicale::USER.into()),
        ("SERVICE_CALENDAR_CALDAV_PASSWORD", password.into()),
        ("SERVICE_TZ", zone.into()),
    ]
}

#[tokio::test]
async fn caldav_events_are_created_listed_and_stored_in_radicale() {
    if !radicale::available() {
        return;
    }
    let radicale = Radicale::start();
    radicale.mkcalendar("work", "Work").await;
    radicale.mkcalendar("home", "Home").await;
    let clock = Clock::new();
    let seeded = [
        (
            "weekly",
            "Weekly review",
            vec![
                format!("DTSTART:{}", clock.utc(-21, 15)),
                "DURATION:PT1H".into(),
                "RRULE:FREQ=WEEKLY".into(),
            ],
        ),
        (
            "course",
            "Old course",
            vec![
                format!("DTSTART:{}", clock.utc(-10, 9)),
                "RRULE:FREQ=DAILY;COUNT=5".into(),
            ],
        ),
        (
            "holiday",
            "Holiday",
            vec![format!("DTSTART;VALUE=DATE:{}", clock.date(0))],
        ),
        (
            "conference",
            "Conference",
            vec![
                format!("DTSTART;VALUE=DATE:{}", clock.date(-1)),
                format!("DTEND;VALUE=DATE:{}", clock.date(2)),
            ],
        ),
        (
            "standup",
            "Stand-up",
            vec![
                format!("DTSTART:{}", clock.utc(-2, 8)),
                "DURATION:PT15M".into(),
                "RRULE:FREQ=DAILY".into(),
                format!("EXDATE:{}", clock.utc(0, 8)),
            ],
        ),
        (
            "flight",
            "Flight",
            vec![
                format!("DTSTART:{}", clock.utc(1, 10)),
                format!("DTEND:{}", clock.utc(1, 12)),
            ],
        ),
    ];
    for (uid, summary, lines) in &seeded {
        radicale.put("work", uid, ics(uid, summary, lines)).await;
    }
    let yoga = vec![
        format!("DTSTART:{}", clock.utc(0, 18)),
        format!("DTEND:{}", clock.utc(0, 19)),
    ];
    radicale
        .put("home", "yoga", ics("yoga", "Yoga", &yoga))
        .await;

    let today = clock.today.format("%Y-%m-%d").to_string();
    let create = json!({
        "summary": "Dentist",
        "start": format!("{today}T16:00"),
        "end": format!("{today}T16:30"),
        "location": "Main St 1, Springfield",
        "description": "Check-up; bring the card",
    });
    let mut script = Vec::new();
    script.extend(calls("create_calendar_event", create));
    script.extend(calls("list_calendar_events_today", json!({})));
    script.extend(calls(
        "list_calendar_events_today",
        json!({"calendar": "home"}),
    ));
    script.extend(calls(
        "list_calendar_events_today",
        json!({"calendar": "Gym"}),
    ));
    let llm = llm::openai(script).await;
    let mut env = openai_env(&llm.url);
    env.extend(caldav_env(&radicale, radicale::PASSWORD, &clock.zone));
    env.push(("SERVICE_CALENDAR_WRITE_ALLOWED", "true".into()));
    env.push(("SERVICE_CALENDAR_DEFAULT", "Work".into()));
    let server = Server::start_with_owned(&env);
    let entry = server.adapter("calendar").await.unwrap();
    assert_eq!(entry["status"], "running", "{entry}");
    let names = tool_names(&server).await;
    assert!(
        names.contains(&"create_calendar_event".to_owned()),
        "{names:?}"
    );

    let created = output(&tool_call(&server, "default").await);
    assert_eq!(created["created"]["calendar"], "Work");
    assert_eq!(created["created"]["start"], clock.shown(16));
    // In Radicale's own storage, as UTC times.
    let stored = radicale.stored("work");
    let (path, text) = stored
        .iter()
        .find(|(_, text)| text.contains("SUMMARY:Dentist"))
        .unwrap_or_else(|| panic!("not stored: {stored:?}"));
    assert!(
        text.contains(&format!("DTSTART:{}", clock.utc(0, 16))),
        "{text}"
    );
    assert!(text.contains("LOCATION:Main St 1\\, Springfield"), "{text}");
    assert!(
        path.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .ends_with("@service-runtime.ics"),
        "{path:?}"
    );

    let listed = output(&tool_call(&server, "default").await);
    assert_eq!(listed["time_zone"], clock.zone.as_str());
    assert_eq!(listed["date"], today.as_str());
    assert_eq!(
        summaries(&listed),
        ["Conference", "Holiday", "Weekly review", "Dentist"],
        "{listed}"
    );
    let events = listed["events"].as_array().unwrap();
    assert_eq!(events[0]["all_day"], true);
    assert_eq!(
        events[0]["start"],
        clock.day(-1).format("%Y-%m-%d").to_string()
    );
    assert_eq!(
        events[0]["end"],
        clock.day(1).format("%Y-%m-%d").to_string()
    );
    assert_eq!(events[1]["start"], today.as_str());
    assert_eq!(
        (&events[2]["start"], &events[2]["recurring"]),
        (&json!(clock.shown(15)), &json!(true))
    );
    assert_eq!(events[2]["end"], clock.shown(16));
    assert_eq!(events[3]["location"], "Main St 1, Springfield");

    let home = output(&tool_call(&server, "default").await);
    assert_eq!(summaries(&home), ["Yoga"]);
    assert_eq!(home["events"][0]["calendar"], "Home");

    let unknown = tool_call(&server, "default").await;
    let error = unknown["error"].as_str().unwrap();
    assert!(
        error.contains("no calendar named \"Gym\"") && error.contains("Work"),
        "{error}"
    );
    assert_eq!(
        server.adapter("calendar").await.unwrap()["status"],
        "running"
    );
}

#[tokio::test]
async fn a_wrong_caldav_password_is_a_clear_tool_error() {
    if !radicale::available() {
        return;
    }
    let radicale = Radicale::start();
    radicale.mkcalendar("work", "Work").await;
    let mut script = Vec::new();
    script.extend(calls("list_calendar_events_today", json!({})));
    let llm = llm::openai(script).await;
    let mut env = openai_env(&llm.url);
    env.extend(caldav_env(&radicale, "not-the-password", "UTC"));
    let server = Server::start_with_owned(&env);
    let call = tool_call(&server, "default").await;
    let error = call["error"].as_str().unwrap_or_else(|| panic!("{call}"));
    assert!(
        error.contains("refused the user name or password (401"),
        "{error}"
    );
    assert!(
        error.contains("SERVICE_CALENDAR_CALDAV_PASSWORD"),
        "{error}"
    );
    assert!(!error.contains("not-the-password"));
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(
        !log.contains("not-the-password"),
        "the password reached the log"
    );
}

fn google_events(clock: &Clock) -> Vec<Value> {
    let at = |days: i64, hour: u32| {
        let local = clock.day(days).and_hms_opt(hour, 0, 0).unwrap();
        clock
            .offset
            .from_local_datetime(&local)
            .unwrap()
            .to_rfc3339()
    };
    vec![
        json!({"id": "r1_20261123", "status": "confirmed", "summary": "Team sync",
               "start": {"dateTime": at(0, 9)}, "end": {"dateTime": at(0, 10)},
               "recurringEventId": "r1"}),
        json!({"id": "a1", "status": "confirmed", "summary": "Public holiday",
               "start": {"date": clock.day(0).to_string()}, "end": {"date": clock.day(1).to_string()}}),
        json!({"id": "c1", "status": "cancelled", "summary": "Cancelled lunch",
               "start": {"dateTime": at(0, 12)}, "end": {"dateTime": at(0, 13)}}),
        json!({"id": "t1", "status": "confirmed", "summary": "Tomorrow",
               "start": {"dateTime": at(1, 9)}, "end": {"dateTime": at(1, 10)}}),
    ]
}

#[tokio::test]
async fn google_calendar_lists_and_inserts_with_a_token_it_refreshes_itself() {
    let clock = Clock::new();
    let google = FakeGoogle::start(google_events(&clock)).await;
    let today = clock.today.format("%Y-%m-%d").to_string();
    // Local 17:00 to 19:00 of the zone's today, written in UTC: still today wherever noon is.
    let (departs, lands) = (clock.utc_iso(0, 17), clock.utc_iso(0, 19));
    let mut script = Vec::new();
    script.extend(calls("list_calendar_events_today", json!({})));
    script.extend(calls(
        "create_calendar_event",
        json!({"summary": "Flight to Lisbon", "start": departs, "end": lands, "location": "Gate B7"}),
    ));
    script.extend(calls(
        "create_calendar_event",
        json!({"summary": "Off", "start": today, "end": today}),
    ));
    script.extend(calls("list_calendar_events_today", json!({})));
    script.extend(calls("list_calendar_events_today", json!({})));
    let llm = llm::openai(script).await;
    let mut env = openai_env(&llm.url);
    env.extend(google.env(google_calendar::REFRESH_TOKEN));
    env.push(("SERVICE_TZ", clock.zone.clone()));
    env.push(("SERVICE_CALENDAR_WRITE_ALLOWED", "true".into()));
    let server = Server::start_with_owned(&env);

    let listed = output(&tool_call(&server, "default").await);
    assert_eq!(
        summaries(&listed),
        ["Public holiday", "Team sync"],
        "{listed}"
    );
    assert_eq!(listed["events"][1]["start"], clock.shown(9));
    assert_eq!(listed["events"][1]["recurring"], true);
    assert_eq!(google.token_requests(), 1);

    let created = output(&tool_call(&server, "default").await);
    assert_eq!(created["event"]["id"], "fakeevent1");
    let all_day = output(&tool_call(&server, "default").await);
    assert_eq!(all_day["created"]["all_day"], true);
    let inserted = google.inserted();
    assert_eq!(inserted[0].0, "primary");
    assert_eq!(inserted[0].1["start"]["dateTime"], departs);
    assert_eq!(inserted[0].1["start"]["timeZone"], clock.zone.as_str());
    assert_eq!(inserted[0].1["location"], "Gate B7");
    let tomorrow = clock.day(1).format("%Y-%m-%d").to_string();
    assert_eq!(
        inserted[1].1["end"],
        json!({"date": tomorrow}),
        "Google's all-day end is exclusive"
    );
    assert_eq!(
        google.token_requests(),
        1,
        "the access token is kept until it expires"
    );

    let listed = output(&tool_call(&server, "default").await);
    assert!(
        summaries(&listed).contains(&"Flight to Lisbon".to_owned()),
        "{listed}"
    );

    // A revoked access token is refreshed once and the call goes through.
    google.revoke();
    let listed = output(&tool_call(&server, "default").await);
    assert_eq!(summaries(&listed).len(), 4, "{listed}");
    assert_eq!(google.token_requests(), 2);

    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    for secret in [
        google_calendar::REFRESH_TOKEN,
        google_calendar::CLIENT_SECRET,
    ] {
        assert!(!log.contains(secret), "a credential reached the log");
    }
}

#[tokio::test]
async fn a_refused_refresh_token_is_a_clear_tool_error() {
    let google = FakeGoogle::start(Vec::new()).await;
    let llm = llm::openai(calls("list_calendar_events_today", json!({})).to_vec()).await;
    let mut env = openai_env(&llm.url);
    env.extend(google.env("1//revoked-refresh-token"));
    let server = Server::start_with_owned(&env);
    let call = tool_call(&server, "default").await;
    let error = call["error"].as_str().unwrap_or_else(|| panic!("{call}"));
    assert!(
        error.contains("Google refused to refresh the access token: 400 (invalid_grant"),
        "{error}"
    );
    assert!(!error.contains("revoked-refresh-token"));
}

#[tokio::test]
async fn writes_are_offered_and_done_only_while_allowed() {
    let google = FakeGoogle::start(Vec::new()).await;
    let create =
        json!({"summary": "Lunch", "start": "2030-01-02T12:00", "end": "2030-01-02T13:00"});
    let llm = llm::openai(calls("create_calendar_event", create).to_vec()).await;
    let mut env = openai_env(&llm.url);
    env.extend(google.env(google_calendar::REFRESH_TOKEN));
    let server = Server::start_with_owned(&env);
    server
        .write_key("calendar", "SERVICE_CALENDAR_WRITE_ALLOWED", "true")
        .await;
    assert!(
        tool_names(&server)
            .await
            .contains(&"create_calendar_event".to_owned())
    );
    // Turned off through the API: the adapter starts anew at once and no longer offers the
    // tool; a model that still calls it is refused.
    let body = server
        .write_key("calendar", "SERVICE_CALENDAR_WRITE_ALLOWED", "false")
        .await;
    assert_eq!(body["applied_to"], json!(["calendar"]), "{body}");
    let names = tool_names(&server).await;
    assert!(names.contains(&"list_calendar_events_today".to_owned()));
    assert!(
        !names.contains(&"create_calendar_event".to_owned()),
        "{names:?}"
    );
    let refused = tool_call(&server, "default").await;
    assert!(refused["error"].is_string(), "{refused}");
    assert!(google.inserted().is_empty());
    drop(server);

    let mut env = openai_env(&llm.url);
    env.extend(google.env(google_calendar::REFRESH_TOKEN));
    let read_only = Server::start_with_owned(&env);
    let names = tool_names(&read_only).await;
    assert!(names.contains(&"list_calendar_events_today".to_owned()));
    assert!(
        !names.contains(&"create_calendar_event".to_owned()),
        "{names:?}"
    );

    // Nothing configured: no tools, and the entry names both ways to configure it (spec 3.2
    // rule 5: an error, counted, its start returning normally).
    let bare = Server::start();
    let entry = eventually(10, async || {
        bare.adapter("calendar")
            .await
            .filter(|e| e["status"] == "error")
    })
    .await;
    let caldav = [
        "SERVICE_CALENDAR_CALDAV_URL",
        "SERVICE_CALENDAR_CALDAV_USER",
        "SERVICE_CALENDAR_CALDAV_PASSWORD",
    ];
    let google_way = [
        "SERVICE_CALENDAR_GOOGLE_CLIENT_ID",
        "SERVICE_CALENDAR_GOOGLE_CLIENT_SECRET",
        "SERVICE_CALENDAR_GOOGLE_REFRESH_TOKEN",
    ];
    assert_eq!(
        (
            &entry["missing_settings_any_of"],
            &entry["missing_settings"],
            &entry["error_count"]
        ),
        (
            &json!([caldav, google_way]),
            &json!([caldav, google_way].concat()),
            &json!(1)
        ),
        "{entry}"
    );
    assert_eq!(
        entry["error_message"],
        "ConfigError: SERVICE_CALENDAR_CALDAV_URL, SERVICE_CALENDAR_CALDAV_USER and \
         SERVICE_CALENDAR_CALDAV_PASSWORD are not set; or SERVICE_CALENDAR_GOOGLE_CLIENT_ID, \
         SERVICE_CALENDAR_GOOGLE_CLIENT_SECRET and SERVICE_CALENDAR_GOOGLE_REFRESH_TOKEN are not \
         set (any one of these ways will do)"
    );
    assert!(
        !tool_names(&bare)
            .await
            .iter()
            .any(|t| t.contains("calendar"))
    );

    // Its keys written through the API: it starts anew, reaches the origins they name and
    // offers its tools, with no restart.
    for (name, value) in google.env(google_calendar::REFRESH_TOKEN) {
        bare.write_key("calendar", name, &value).await;
    }
    let entry = bare.adapter("calendar").await.unwrap();
    assert_eq!(
        (&entry["status"], &entry["error_message"]),
        (&json!("running"), &json!(null)),
        "the configuration error is gone once resolved: {entry}"
    );
    assert!(
        tool_names(&bare)
            .await
            .contains(&"list_calendar_events_today".to_owned())
    );
}

#[tokio::test]
async fn atlas_lists_todays_events() {
    let clock = Clock::new();
    let google = FakeGoogle::start(google_events(&clock)).await;
    let llm = llm::openai(calls("list_calendar_events_today", json!({})).to_vec()).await;
    let mut env = openai_env(&llm.url);
    env.extend(google.env(google_calendar::REFRESH_TOKEN));
    env.push(("SERVICE_TZ", clock.zone.clone()));
    let server = Server::start_with_owned(&env);
    let (status, atlas) = server.post("/api/store/atlas/install", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{atlas}");
    assert!(
        atlas["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("list_calendar_events_today")),
        "{atlas}"
    );
    let call = tool_call(&server, "Atlas").await;
    assert_eq!(summaries(&output(&call)), ["Public holiday", "Team sync"]);
    // The model was offered the tool with the calendar's own description.
    let offered = &llm.requests()[0].body["tools"];
    let tool = offered
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "list_calendar_events_today")
        .unwrap_or_else(|| panic!("{offered}"));
    assert!(
        tool["function"]["description"]
            .as_str()
            .unwrap()
            .contains("today")
    );
}

/// Enabling the calendar without its settings is a 409 naming both ways to configure it, as
/// for the other adapters (it was a 500), and leaves it disabled.
#[tokio::test]
async fn enabling_the_calendar_without_settings_names_both_ways() {
    let server = Server::start();
    eventually(30, async || {
        server
            .adapter("calendar")
            .await
            .filter(|e| e["status"] == "error")
    })
    .await;
    let (status, body) = server
        .post("/api/adapters/calendar/disable", json!(null))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = server
        .post("/api/adapters/calendar/enable", json!(null))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["error"],
        "adapter \"calendar\" is not configured: set SERVICE_CALENDAR_CALDAV_URL, \
         SERVICE_CALENDAR_CALDAV_USER, SERVICE_CALENDAR_CALDAV_PASSWORD; or \
         SERVICE_CALENDAR_GOOGLE_CLIENT_ID, SERVICE_CALENDAR_GOOGLE_CLIENT_SECRET, \
         SERVICE_CALENDAR_GOOGLE_REFRESH_TOKEN"
    );
    let entry = server.adapter("calendar").await.unwrap();
    assert_eq!(
        (&entry["status"], &entry["note"]),
        (&json!("stopped"), &json!("disabled from the dashboard"))
    );
}
