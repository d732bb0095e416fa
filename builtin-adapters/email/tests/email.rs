//! The adapter end to end against real servers on 127.0.0.1: Dovecot for IMAP and aiosmtpd
//! for SMTP, both started by each test in a temporary folder.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use service_contract::{AdapterStatus, ProfileChoice, TaskState};
use service_email::metadata::{ANSWERED, LAST_SKIPPED, POLLS, SKIPPED};

use support::dovecot::{self, Dovecot};
use support::smtp_sink::{Received, SmtpSink};
use support::{Agents, BOT, Harness, lock, mail, servers, settings, wait_for, with};

use service_email::{CLAIMED_KEYWORD as CLAIMED, SKIPPED_KEYWORD};

/// Waits until `sink` has accepted at least `count` messages; returns all of them.
async fn replies(sink: &SmtpSink, count: usize) -> Vec<Received> {
    wait_for(&format!("{count} repl(ies) through SMTP"), || {
        Some(sink.received()).filter(|r| r.len() >= count)
    })
    .await
}

fn has(flags: &[String], flag: &str) -> bool {
    flags.iter().any(|f| f == flag)
}

#[tokio::test]
async fn a_plain_message_is_answered_once_with_threading_headers() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let question = mail(
        "Alice Example <alice@example.org>",
        "Lunch plans",
        "q2@example.org",
        &[
            "In-Reply-To: <q1@example.org>",
            "References: <q0@example.org> <q1@example.org>",
        ],
        "Where shall we eat?\n\nOn Monday, Bot wrote:\n> Somewhere nice\n",
    );
    let lunch = dovecot.deliver(question).await;
    let already_re = mail(
        "bob@example.org",
        "Re: Dinner",
        "d1@example.org",
        &[],
        "At 8?\n",
    );
    let dinner = dovecot.deliver(already_re).await;

    let harness = Harness::new(settings(&dovecot, sink.port));
    harness.start().await;
    let received = replies(&sink, 2).await;
    harness.polls_pass(2).await;
    assert_eq!(sink.received().len(), 2, "each message is answered once");

    let to_alice = &received[0];
    assert_eq!(to_alice.rcpt_tos, ["alice@example.org"]);
    assert_eq!(to_alice.header("From").as_deref(), Some(BOT));
    assert_eq!(to_alice.header("To").as_deref(), Some("alice@example.org"));
    assert_eq!(to_alice.subject(), "Re: Lunch plans");
    assert_eq!(
        to_alice.header("In-Reply-To").as_deref(),
        Some("<q2@example.org>")
    );
    assert_eq!(
        to_alice.header("References").as_deref(),
        Some("<q0@example.org> <q1@example.org> <q2@example.org>")
    );
    assert_eq!(
        to_alice.header("Auto-Submitted").as_deref(),
        Some("auto-replied")
    );
    let message_id = to_alice.header("Message-ID").unwrap();
    assert!(message_id.ends_with("@example.test>"), "{message_id}");
    // The agent saw the question without the quoted history; the reply is its answer.
    let prompt = "From: alice@example.org\nSubject: Lunch plans\n\nWhere shall we eat?";
    assert_eq!(to_alice.body().trim_end(), format!("answer: {prompt}"));

    let to_bob = &received[1];
    assert_eq!(to_bob.rcpt_tos, ["bob@example.org"]);
    assert_eq!(to_bob.subject(), "Re: Dinner", "no doubled Re:");
    assert_eq!(
        to_bob.header("References").as_deref(),
        Some("<d1@example.org>")
    );

    let requests = lock(&harness.agents.requests).clone();
    assert_eq!(requests[0].prompt, prompt);
    assert_eq!(
        requests[0].profile,
        ProfileChoice::Preferred("default".to_owned())
    );
    assert_eq!(requests[0].source, "email");

    // One task per message, linked to the run's trace.
    let created = lock(&harness.tasks.created).clone();
    assert_eq!(created.len(), 2);
    assert_eq!(created[0].1, "Email from alice@example.org: Lunch plans");
    assert_eq!(created[0].2.as_deref(), Some("default"));
    assert_eq!(
        harness.tasks.history(&created[0].0),
        [
            (TaskState::Running, None),
            (TaskState::Completed, Some("trace-1".to_owned()))
        ]
    );

    for uid in [lunch, dinner] {
        let flags = dovecot.flags(uid).await;
        assert!(has(&flags, "Answered") && has(&flags, CLAIMED), "{flags:?}");
        assert!(!has(&flags, "Seen"), "the adapter only peeks: {flags:?}");
    }
    let entry = harness.entry();
    assert_eq!(entry.status, AdapterStatus::Running);
    assert_eq!(entry.error_count, 0, "{:?}", entry.error_message);
    assert_eq!(harness.count(ANSWERED), 2);
    assert!(entry.last_activity_at.is_some());
    harness.stop().await;
}

#[tokio::test]
async fn multipart_html_and_latin1_messages_reach_the_agent_as_text() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let alternative = mail(
        "alice@example.org",
        "Alternative",
        "a1@example.org",
        &["Content-Type: multipart/alternative; boundary=\"sep\""],
        "--sep\nContent-Type: text/plain; charset=utf-8\n\nPlain words win\n\
         --sep\nContent-Type: text/html; charset=utf-8\n\n<p>HTML words lose</p>\n--sep--\n",
    );
    let html = mail(
        "alice@example.org",
        "Only HTML",
        "h1@example.org",
        &["Content-Type: text/html; charset=utf-8"],
        "<html><body><p>Hello <b>there</b>, how are you?</p></body></html>\n",
    );
    let mut latin1 = mail(
        "alice@example.org",
        "=?ISO-8859-1?Q?Caf=E9?=",
        "l1@example.org",
        &["Content-Type: text/plain; charset=ISO-8859-1"],
        "",
    )
    .into_bytes();
    latin1.extend(b"Un caf\xE9 \xE0 midi, s'il vous pla\xEEt ?\r\n");
    for message in [alternative.into_bytes(), html.into_bytes(), latin1] {
        dovecot.deliver(message).await;
    }

    let harness = Harness::new(settings(&dovecot, sink.port));
    harness.start().await;
    let received = replies(&sink, 3).await;

    let prompts = harness.agents.prompts();
    assert_eq!(
        prompts[0],
        "From: alice@example.org\nSubject: Alternative\n\nPlain words win"
    );
    assert!(
        prompts[1].contains("Hello there, how are you?"),
        "{}",
        prompts[1]
    );
    assert!(!prompts[1].contains('<'), "{}", prompts[1]);
    let french = "Un café à midi, s'il vous plaît ?";
    assert_eq!(
        prompts[2],
        format!("From: alice@example.org\nSubject: Café\n\n{french}")
    );
    // The decoded text goes back out intact (the reply is UTF-8).
    assert!(
        received[2].body().contains(french),
        "{}",
        received[2].body()
    );
    assert_eq!(received[2].subject(), "Re: Café");
    harness.stop().await;
}

#[tokio::test]
async fn automated_bulk_list_and_own_mail_are_never_answered() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let ignored = [
        mail(
            "vacation@example.org",
            "Away",
            "v1@x",
            &["Auto-Submitted: auto-replied"],
            "Out.\n",
        ),
        mail(
            "news@example.org",
            "Deals",
            "n1@x",
            &["Precedence: bulk"],
            "Buy!\n",
        ),
        mail(
            "list@example.org",
            "Digest",
            "l1@x",
            &["List-Id: <dev.example.org>"],
            "Posts\n",
        ),
        mail(BOT, "Echo", "e1@x", &[], "My own words\n"),
        mail(
            "mailer-daemon@example.org",
            "Failure",
            "b1@x",
            &["Return-Path: <>"],
            "Bounced\n",
        ),
    ];
    let mut uids = Vec::new();
    for message in ignored {
        uids.push(dovecot.deliver(message).await);
    }
    // Delivered last and answered in UID order: once it is answered, the rest were seen.
    dovecot
        .deliver(mail(
            "alice@example.org",
            "Real",
            "r1@x",
            &[],
            "A real question\n",
        ))
        .await;

    let harness = Harness::new(settings(&dovecot, sink.port));
    harness.start().await;
    replies(&sink, 1).await;
    harness.polls_pass(2).await;

    let received = sink.received();
    assert_eq!(received.len(), 1, "only the person's message is answered");
    assert_eq!(received[0].rcpt_tos, ["alice@example.org"]);
    assert_eq!(harness.agents.prompts().len(), 1, "no run for ignored mail");
    for uid in uids {
        let flags = dovecot.flags(uid).await;
        assert!(has(&flags, SKIPPED_KEYWORD), "{uid}: {flags:?}");
        assert!(
            !has(&flags, "Answered") && !has(&flags, CLAIMED),
            "{uid}: {flags:?}"
        );
    }
    assert_eq!(harness.count(SKIPPED), 5);
    let last = harness.entry().metadata[LAST_SKIPPED].clone();
    assert!(
        last.contains("from mailer-daemon@example.org") && last.contains("bounce"),
        "{last}"
    );
    harness.stop().await;
}

#[tokio::test]
async fn senders_outside_the_allowed_list_are_ignored() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let stranger = dovecot
        .deliver(mail(
            "stranger@else.example",
            "Hi",
            "s1@x",
            &[],
            "Who are you?\n",
        ))
        .await;
    dovecot
        .deliver(mail(
            "Friend@Example.org",
            "Hi",
            "f1@x",
            &[],
            "Hello friend\n",
        ))
        .await;
    dovecot
        .deliver(mail("bob@team.example", "Hi", "t1@x", &[], "Hello team\n"))
        .await;

    let allowed = (
        "SERVICE_EMAIL_ALLOWED_SENDERS",
        "friend@example.org, @team.example",
    );
    let harness = Harness::new(with(settings(&dovecot, sink.port), &[allowed]));
    harness.start().await;
    replies(&sink, 2).await;
    harness.polls_pass(2).await;

    let recipients: BTreeSet<String> = sink
        .received()
        .into_iter()
        .flat_map(|r| r.rcpt_tos)
        .collect();
    assert_eq!(
        recipients,
        BTreeSet::from([
            "Friend@Example.org".to_owned(),
            "bob@team.example".to_owned()
        ])
    );
    assert!(has(&dovecot.flags(stranger).await, SKIPPED_KEYWORD));
    assert_eq!(
        harness.entry().metadata[LAST_SKIPPED],
        format!(
            "message {stranger} from stranger@else.example was not answered: \
             stranger@else.example is not in SERVICE_EMAIL_ALLOWED_SENDERS"
        )
    );
    harness.stop().await;
}

#[tokio::test]
async fn a_restart_mid_batch_answers_every_message_exactly_once() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    // Claimed by an instance that died before it could reply: answered again, once.
    let crashed = dovecot
        .deliver_flagged(
            mail("alice@example.org", "One", "m1@x", &[], "First\n"),
            Some(&format!("({CLAIMED})")),
        )
        .await;
    let second = dovecot
        .deliver(mail("alice@example.org", "Two", "m2@x", &[], "Second\n"))
        .await;
    let slow = dovecot
        .deliver(mail(
            "alice@example.org",
            "Three",
            "m3@x",
            &[],
            "Third, HOLD on\n",
        ))
        .await;
    let last = dovecot
        .deliver(mail("alice@example.org", "Four", "m4@x", &[], "Fourth\n"))
        .await;

    let first_run = Harness::with_agents(settings(&dovecot, sink.port), Agents::holding("HOLD"));
    first_run.start().await;
    replies(&sink, 2).await;
    wait_for("the slow run to start", || {
        (first_run.agents.prompts().len() == 3).then_some(())
    })
    .await;
    let asked = Instant::now();
    first_run.stop().await;
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "stop took {:?} with a run in flight",
        asked.elapsed()
    );
    let slow_task = lock(&first_run.tasks.created)[2].0.clone();
    assert_eq!(
        first_run.tasks.history(&slow_task).last(),
        Some(&(TaskState::Cancelled, Some("trace-3".to_owned())))
    );
    let slow_flags = dovecot.flags(slow).await;
    assert!(
        has(&slow_flags, CLAIMED) && !has(&slow_flags, "Answered"),
        "{slow_flags:?}"
    );
    assert!(
        dovecot.flags(last).await.is_empty(),
        "not reached before the stop"
    );

    let second_run = Harness::new(settings(&dovecot, sink.port));
    second_run.start().await;
    replies(&sink, 4).await;
    second_run.polls_pass(2).await;

    let answered: Vec<String> = sink
        .received()
        .iter()
        .map(|r| r.header("In-Reply-To").unwrap())
        .collect();
    assert_eq!(answered, ["<m1@x>", "<m2@x>", "<m3@x>", "<m4@x>"]);
    for uid in [crashed, second, slow, last] {
        assert!(has(&dovecot.flags(uid).await, "Answered"), "{uid}");
    }
    second_run.stop().await;
}

#[tokio::test]
async fn stop_is_prompt_between_polls() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let hourly = ("SERVICE_EMAIL_POLL_SECS", "3600");
    let harness = Harness::new(with(settings(&dovecot, sink.port), &[hourly]));
    harness.start().await;
    harness.polls_pass(1).await;
    let asked = Instant::now();
    harness.stop().await;
    assert!(
        asked.elapsed() < Duration::from_millis(500),
        "{:?}",
        asked.elapsed()
    );

    // Started again, it polls at once rather than after the interval.
    harness.start().await;
    harness.polls_pass(1).await;
    harness.stop().await;
}

#[tokio::test]
async fn an_oversized_message_is_skipped_with_a_note() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let big = dovecot
        .deliver(mail(
            "alice@example.org",
            "Big",
            "big@x",
            &[],
            &"x".repeat(5_000),
        ))
        .await;
    dovecot
        .deliver(mail(
            "alice@example.org",
            "Small",
            "small@x",
            &[],
            "Short one\n",
        ))
        .await;
    let limit = ("SERVICE_EMAIL_MAX_MESSAGE_BYTES", "2000");
    let harness = Harness::new(with(settings(&dovecot, sink.port), &[limit]));
    harness.start().await;

    let received = replies(&sink, 1).await;
    assert_eq!(
        received[0].header("In-Reply-To").as_deref(),
        Some("<small@x>")
    );
    assert!(has(&dovecot.flags(big).await, SKIPPED_KEYWORD));
    let note = harness.entry().metadata[LAST_SKIPPED].clone();
    assert!(
        note.starts_with(&format!("message {big} was not answered: it has "))
            && note.ends_with("bytes, more than SERVICE_EMAIL_MAX_MESSAGE_BYTES (2000)"),
        "{note}"
    );
    harness.stop().await;
}

#[tokio::test]
async fn a_missing_setting_is_an_error_naming_the_variable() {
    let harness = Harness::new(vec![
        ("SERVICE_EMAIL_IMAP_HOST", "imap.example.org".to_owned()),
        ("SERVICE_EMAIL_SMTP_HOST", "smtp.example.org".to_owned()),
        ("SERVICE_EMAIL_USERNAME", "bot@example.org".to_owned()),
    ]);
    harness.start().await;
    let entry = harness.entry();
    assert_eq!(
        (entry.status, entry.missing_settings, entry.error_count),
        (
            AdapterStatus::Error,
            vec!["SERVICE_EMAIL_PASSWORD".to_owned()],
            1
        ),
        "a missing setting marks an error and returns (spec 3.2 rule 5)"
    );
    harness.stop().await;
    assert_eq!(harness.count(POLLS), 0, "it stayed offline");
}

#[tokio::test]
async fn a_wrong_password_gives_a_clear_error_without_the_password() {
    if !dovecot::available() {
        return;
    }
    let dovecot = Dovecot::start();
    let wrong = "Wr0ng-Passw0rd";
    let harness = Harness::new(vec![
        ("SERVICE_EMAIL_IMAP_HOST", "127.0.0.1".to_owned()),
        ("SERVICE_EMAIL_IMAP_PORT", dovecot.port.to_string()),
        ("SERVICE_EMAIL_IMAP_TLS", "none".to_owned()),
        ("SERVICE_EMAIL_SMTP_HOST", "localhost".to_owned()),
        ("SERVICE_EMAIL_SMTP_TLS", "none".to_owned()),
        ("SERVICE_EMAIL_USERNAME", dovecot::USER.to_owned()),
        ("SERVICE_EMAIL_PASSWORD", wrong.to_owned()),
    ]);
    harness.start().await;
    let message = wait_for("the login to be refused", || harness.entry().error_message).await;
    assert!(
        message.starts_with(&format!(
            "AuthError: the IMAP server refused the login of \"{}\" \
             ([AUTHENTICATIONFAILED] Authentication failed.); check SERVICE_EMAIL_USERNAME and \
             SERVICE_EMAIL_PASSWORD",
            dovecot::USER
        )),
        "{message}"
    );
    assert!(!message.contains(wrong), "{message}");
    let entry = harness.entry();
    assert_eq!((entry.status, entry.error_count), (AdapterStatus::Error, 1));
    harness.stop().await;
}

#[tokio::test]
async fn with_smtp_down_no_agent_runs_and_the_message_waits() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let uid = dovecot
        .deliver(mail(
            "alice@example.org",
            "Hello",
            "h1@x",
            &[],
            "Anyone there?\n",
        ))
        .await;
    let closed_port = sink.port;
    drop(sink);
    let harness = Harness::new(settings(&dovecot, closed_port));
    harness.start().await;
    let message = wait_for("the SMTP failure", || harness.entry().error_message).await;
    assert!(
        message.starts_with(&format!(
            "ConnectionError: could not log in to the SMTP server 127.0.0.1:{closed_port}"
        )) && message.ends_with("retrying in 1 s"),
        "{message}"
    );
    assert!(
        harness.agents.prompts().is_empty(),
        "no answer that could not be sent"
    );
    assert!(dovecot.flags(uid).await.is_empty(), "left for a later poll");
    harness.stop().await;
}

#[tokio::test]
async fn failures_are_recorded_and_the_loop_goes_on() {
    let Some((dovecot, sink)) = servers() else {
        return;
    };
    let failing = dovecot
        .deliver(mail(
            "alice@example.org",
            "Broken",
            "f1@x",
            &[],
            "Please FAIL\n",
        ))
        .await;
    let refused = dovecot
        .deliver(mail(
            "refused@example.org",
            "Hi",
            "r1@x",
            &[],
            "Reply to nowhere\n",
        ))
        .await;
    dovecot
        .deliver(mail("bob@example.org", "Fine", "ok@x", &[], "All good?\n"))
        .await;
    let harness = Harness::new(settings(&dovecot, sink.port));
    harness.start().await;
    let received = replies(&sink, 2).await;
    harness.polls_pass(2).await;

    // A failed run still gets a reply, which names the trace but not the provider's words.
    assert_eq!(received[0].rcpt_tos, ["alice@example.org"]);
    assert_eq!(
        received[0].body().trim_end(),
        "Sorry, no answer could be made to your message. (reference: trace trace-1)"
    );
    let created = lock(&harness.tasks.created).clone();
    assert_eq!(
        harness.tasks.history(&created[0].0).last(),
        Some(&(TaskState::Error, Some("trace-1".to_owned())))
    );
    assert!(has(&dovecot.flags(failing).await, "Answered"));

    // A reply the SMTP server refuses for good is given up, with the reason on the entry.
    let refused_flags = dovecot.flags(refused).await;
    assert!(has(&refused_flags, SKIPPED_KEYWORD) && !has(&refused_flags, "Answered"));
    assert_eq!(
        harness.tasks.history(&created[1].0).last(),
        Some(&(TaskState::Error, Some("trace-2".to_owned())))
    );
    let entry = harness.entry();
    let error = entry.error_message.clone().unwrap();
    assert!(
        error.starts_with("SmtpError: could not send a reply through the SMTP server")
            && error.contains("550")
            && error.contains("No such mailbox here"),
        "{error}"
    );
    assert_eq!(entry.error_count, 1);

    // ...and the next message is answered as usual.
    assert_eq!(received[1].rcpt_tos, ["bob@example.org"]);
    assert_eq!(sink.received().len(), 2);
    assert_eq!(harness.count(ANSWERED), 2);
    harness.stop().await;
}

#[tokio::test]
async fn tls_and_starttls_check_the_servers_certificate() {
    if !dovecot::available() {
        return;
    }
    let dovecot = Dovecot::start_with_tls();
    let tls_port = dovecot.tls_port.unwrap();
    for (security, port) in [("tls", tls_port), ("starttls", dovecot.port)] {
        let harness = Harness::new(vec![
            ("SERVICE_EMAIL_IMAP_HOST", "localhost".to_owned()),
            ("SERVICE_EMAIL_IMAP_PORT", port.to_string()),
            ("SERVICE_EMAIL_IMAP_TLS", security.to_owned()),
            ("SERVICE_EMAIL_SMTP_HOST", "localhost".to_owned()),
            ("SERVICE_EMAIL_USERNAME", dovecot::USER.to_owned()),
            ("SERVICE_EMAIL_PASSWORD", dovecot::PASSWORD.to_owned()),
        ]);
        harness.start().await;
        // The server's self-signed certificate is not trusted, so the password never leaves.
        let message = wait_for("the TLS failure", || harness.entry().error_message).await;
        assert!(
            message.starts_with(
                "TlsError: TLS handshake with localhost failed: invalid peer certificate: \
                 UnknownIssuer"
            ),
            "{security}: {message}"
        );
        harness.stop().await;
    }
    assert!(
        !dovecot.log().contains("Login: user="),
        "no login got through:\n{}",
        dovecot.log()
    );
}
