//! The native email adapter through the real binary, against a real Dovecot (IMAP) and a real
//! aiosmtpd (SMTP) started in temporary folders, and the scripted fake model: a message is
//! answered by the agent with threading headers, becomes a task with its trace, and a restart
//! never answers it again; without its settings it is in `error` naming them, and keys written through
//! the API apply without a restart.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::mail_servers::dovecot::{self, Dovecot};
use crate::mail_servers::smtp_sink::{self, Received, SmtpSink};
use crate::support::{Server, eventually, openai_env};

/// Both servers, when they can run here.
fn servers() -> Option<(Dovecot, SmtpSink)> {
    (dovecot::available() && smtp_sink::available()).then(|| (Dovecot::start(), SmtpSink::start()))
}

/// The model's settings and the adapter's: Dovecot's inbox, polled every second, answered
/// through the SMTP sink.
fn settings(llm: &str, dovecot: &Dovecot, sink: &SmtpSink) -> Vec<(&'static str, String)> {
    let mut env = openai_env(llm);
    env.extend([
        ("SERVICE_EMAIL_IMAP_HOST", "127.0.0.1".to_owned()),
        ("SERVICE_EMAIL_IMAP_PORT", dovecot.port.to_string()),
        ("SERVICE_EMAIL_IMAP_TLS", "none".to_owned()),
        ("SERVICE_EMAIL_SMTP_HOST", "127.0.0.1".to_owned()),
        ("SERVICE_EMAIL_SMTP_PORT", sink.port.to_string()),
        ("SERVICE_EMAIL_SMTP_TLS", "none".to_owned()),
        ("SERVICE_EMAIL_USERNAME", dovecot::USER.to_owned()),
        ("SERVICE_EMAIL_PASSWORD", dovecot::PASSWORD.to_owned()),
        ("SERVICE_EMAIL_POLL_SECS", "1".to_owned()),
    ]);
    env
}

fn question(subject: &str, message_id: &str, body: &str) -> String {
    format!(
        "From: Alice Example <alice@example.org>\r\nTo: {}\r\nSubject: {subject}\r\n\
         Message-ID: <{message_id}>\r\nDate: Mon, 3 Nov 2025 10:00:00 +0000\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n",
        dovecot::USER
    )
}

async fn replies(sink: &SmtpSink, count: usize) -> Vec<Received> {
    eventually(30, async || {
        Some(sink.received()).filter(|r| r.len() >= count)
    })
    .await
}

/// The adapter's poll count from its registry entry.
async fn polls(server: &Server) -> u64 {
    let entry = server.adapter("email").await.expect("an email entry");
    entry["metadata"]["polls"]
        .as_str()
        .map_or(0, |n| n.parse().unwrap())
}

/// Waits until the adapter has finished two more polls, so whatever it was going to do with
/// the mail there has been done.
async fn polls_pass(server: &Server) {
    let target = polls(server).await + 2;
    eventually(30, async || (polls(server).await >= target).then_some(())).await;
}

#[tokio::test]
async fn a_message_is_answered_once_as_a_task_and_a_restart_does_not_answer_it_again() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let llm = llm::openai(vec![
        Reply::Text("Noon at the usual place."),
        Reply::Text("Eight works."),
    ])
    .await;
    dovecot
        .deliver(question(
            "Lunch plans",
            "q1@example.org",
            "Where shall we eat?",
        ))
        .await;
    let server = Server::start_with_owned(&settings(&llm.url, &dovecot, &sink));

    let received = replies(&sink, 1).await;
    let reply = &received[0];
    assert_eq!(reply.rcpt_tos, ["alice@example.org"]);
    assert_eq!(reply.subject(), "Re: Lunch plans");
    assert_eq!(
        reply.header("In-Reply-To").as_deref(),
        Some("<q1@example.org>")
    );
    assert!(
        reply.body().contains("Noon at the usual place."),
        "{}",
        reply.body()
    );
    let prompt = llm.requests()[0].body.to_string();
    assert!(prompt.contains("Where shall we eat?"), "{prompt}");

    // The run is a task with its trace, and the entry says the adapter runs.
    let task = eventually(10, async || {
        let (_, tasks) = server.get("/api/tasks").await;
        tasks["tasks"]
            .as_array()?
            .iter()
            .find(|t| {
                t["title"] == "Email from alice@example.org: Lunch plans"
                    && t["status"] == "completed"
            })
            .cloned()
    })
    .await;
    let trace = task["trace_id"].as_str().expect("the task names its trace");
    let (status, trace) = server.get(&format!("/api/traces/{trace}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(trace["status"], "ok", "{trace}");
    let entry = server.adapter("email").await.unwrap();
    assert_eq!(entry["status"], "running", "{entry}");
    assert_eq!(entry["kind"], "native", "{entry}");

    // After a restart the first message stays answered; a new one is answered once.
    let server = server.restart();
    dovecot
        .deliver(question("Dinner", "q2@example.org", "Dinner at eight?"))
        .await;
    let received = replies(&sink, 2).await;
    assert_eq!(received[1].subject(), "Re: Dinner");
    assert!(received[1].body().contains("Eight works."));
    polls_pass(&server).await;
    assert_eq!(sink.received().len(), 2, "each message is answered once");
    assert_eq!(llm.requests().len(), 2);
}

#[tokio::test]
async fn a_reply_in_a_thread_continues_its_conversation() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let llm = llm::openai(vec![
        Reply::Text("Noon at the usual place."),
        Reply::Text("At noon, as I said."),
    ])
    .await;
    dovecot
        .deliver(question(
            "Lunch plans",
            "t1@example.org",
            "Where shall we eat?",
        ))
        .await;
    let server = Server::start_with_owned(&settings(&llm.url, &dovecot, &sink));
    replies(&sink, 1).await;
    let follow_up = question("Re: Lunch plans", "t2@example.org", "And what time?").replace(
        "MIME-Version",
        "In-Reply-To: <t1@example.org>\r\nReferences: <t1@example.org>\r\nMIME-Version",
    );
    dovecot.deliver(follow_up).await;
    let received = replies(&sink, 2).await;
    assert!(received[1].body().contains("At noon, as I said."));

    // The second run got the first exchange from the conversation the runtime keeps.
    let second = llm.requests()[1].body["messages"].to_string();
    assert!(
        second.contains("Where shall we eat?") && second.contains("Noon at the usual place."),
        "{second}"
    );
    let (_, listing) = server.get("/api/conversations?source=email").await;
    let threads = listing["conversations"].as_array().unwrap();
    assert_eq!(threads.len(), 1, "{listing}");
    assert_eq!(threads[0]["turns"], 2);
    let (_, shown) = server
        .get(&format!(
            "/api/conversations/{}",
            threads[0]["id"].as_str().unwrap()
        ))
        .await;
    let texts: Vec<&str> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts.len(), 4, "{shown}");
    assert_eq!(texts[3], "At noon, as I said.");
}

#[tokio::test]
async fn waits_for_its_keys_then_polls_without_a_restart() {
    let server = Server::start();
    let entry: Value = server.adapter("email").await.expect("an email entry");
    let missing = [
        "SERVICE_EMAIL_IMAP_HOST",
        "SERVICE_EMAIL_SMTP_HOST",
        "SERVICE_EMAIL_USERNAME",
        "SERVICE_EMAIL_PASSWORD",
    ];
    assert_eq!(
        (
            &entry["status"],
            &entry["error_count"],
            &entry["error_message"]
        ),
        (
            &json!("error"),
            &json!(1),
            &json!(format!(
                "ConfigError: {}, {}, {} and {} are not set",
                missing[0], missing[1], missing[2], missing[3]
            ))
        ),
        "a missing setting is an error naming it (spec 3.2 rule 5): {entry}"
    );
    assert_eq!(entry["missing_settings"], json!(missing));

    // Disabled, it cannot be enabled before it has its settings: 409, nothing changed.
    let (status, body) = server.post("/api/adapters/email/disable", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = server.post("/api/adapters/email/enable", json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["error"],
        format!(
            "adapter \"email\" is not configured: set {}",
            missing.join(", ")
        )
    );
    let entry = server.adapter("email").await.unwrap();
    assert_eq!(
        (&entry["status"], &entry["note"]),
        (&json!("stopped"), &json!("disabled from the dashboard")),
        "{entry}"
    );

    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let (status, body) = server.post("/api/adapters/email/enable", json!({})).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "still without settings: {body}"
    );
    let keys = settings("http://127.0.0.1:9", &dovecot, &sink);
    let mut applied = Vec::new();
    for (name, value) in keys
        .iter()
        .filter(|(name, _)| name.starts_with("SERVICE_EMAIL_"))
    {
        let body = server.write_key("email", name, value).await;
        applied.push(body["applied_to"].clone());
    }
    assert!(
        applied.iter().all(|a| a == &json!([])),
        "a disabled adapter takes its keys when it is enabled: {applied:?}"
    );
    let (status, body) = server.post("/api/adapters/email/enable", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "running", "{body}");
    polls_pass(&server).await;

    // A key written while it runs starts it anew with it.
    let body = server
        .write_key("email", "SERVICE_EMAIL_POLL_SECS", "2")
        .await;
    assert_eq!(body["applied_to"], json!(["email"]), "{body}");
    polls_pass(&server).await;
    let (_, list) = server.get("/api/integrations").await;
    let email = list["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "email")
        .unwrap()
        .clone();
    assert_eq!(email["configured"], true, "{email}");
    assert!(!list.to_string().contains(dovecot::PASSWORD), "{list}");
}
