//! The call itself, over the provider's webhooks: `answer` greets the venue with the request,
//! each `speech` result goes to the agent (with the call so far as history), and its reply is
//! said back, until it marks the outcome; `status` records the provider's view of the call.

use guest_util::Response;
use jiff::civil::DateTime;
use serde_json::{Value, json};

use crate::calls::{self, Call};
use crate::service::adapter::agent::{self, Role, RunRequest, Turn};
use crate::service::adapter::{jobs, log, registry};
use crate::settings::{self, AGENT_PROFILE};
use crate::twiml;

/// Things the venue says before the call is given up.
const MAX_EXCHANGES: usize = 10;
/// Silent turns in a row before the call is given up.
const MAX_SILENCES: u64 = 2;
/// Characters kept of one thing said (either side).
const MAX_SAID_CHARS: usize = 1_000;

const CONFIRMED: &str = "[CONFIRMED]";
const DECLINED: &str = "[DECLINED]";

fn cut(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_SAID_CHARS) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

fn xml(body: String) -> Response {
    Response::new(200, "text/xml; charset=utf-8", body)
}

fn field<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Routes `/calls/<n>/<step>` of an authentic request.
pub fn handle(path: &str, params: &[(String, String)]) -> Response {
    let mut parts = path.trim_start_matches('/').split('/');
    let (Some("calls"), Some(n), Some(step), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Response::error(404, "no such call route");
    };
    let Some(n) = n.parse::<u64>().ok() else {
        return Response::error(404, "no such call");
    };
    let call = match calls::load(n) {
        Ok(Some(call)) => call,
        Ok(None) => return Response::error(404, "no such call"),
        Err(e) => return Response::error(503, &e),
    };
    registry::touch();
    let answer = match step {
        "answer" => answer(&call),
        "speech" => speech(&call, params),
        "status" => status(&call, params),
        _ => return Response::error(404, "no such call route"),
    };
    answer.unwrap_or_else(|e| {
        log::log(log::Level::Error, &format!("call {n}: {e}"));
        Response::error(503, &e)
    })
}

/// "Saturday, November 28 at 7:30 PM".
fn spoken(when: &DateTime) -> String {
    when.strftime("%A, %B %-d at %-I:%M %p").to_string()
}

fn request_facts(call: &Call) -> (String, u64, String, String) {
    let request = &call.request;
    let when = request["reservation_datetime"]
        .as_str()
        .and_then(|w| w.parse::<DateTime>().ok())
        .map_or_else(|| "the requested time".to_owned(), |w| spoken(&w));
    (
        request["venue_name"]
            .as_str()
            .unwrap_or("the venue")
            .to_owned(),
        request["party_size"].as_u64().unwrap_or(1),
        when,
        request["notes"].as_str().unwrap_or_default().to_owned(),
    )
}

fn people(n: u64) -> String {
    match n {
        1 => "one person".into(),
        n => format!("{n} people"),
    }
}

/// The first thing said, from the request alone.
fn opening(call: &Call) -> String {
    let (_, party, when, _) = request_facts(call);
    format!(
        "Hello, this is an automated assistant calling on behalf of a guest. I would like to \
         book a table for {} on {when}. Is that possible?",
        people(party)
    )
}

/// What the agent is told before the call's first turn.
fn briefing(call: &Call) -> String {
    let (venue, party, when, notes) = request_facts(call);
    let notes = match notes.is_empty() {
        true => "none".to_owned(),
        false => notes,
    };
    format!(
        "You are on a phone call with {venue} to book a table for {} on {when}, on behalf of a \
         guest. The guest's notes: {notes}. Each message from now on is what the venue says, \
         transcribed from speech. Answer with only the words to say next: one to three short, \
         polite sentences, no lists or markup. Agree to nothing the notes do not allow. When \
         the venue has confirmed the booking, thank them, say goodbye and end your answer with \
         {CONFIRMED}. When they cannot take it, thank them, say goodbye and end with {DECLINED}.",
        people(party)
    )
}

fn speech_url(n: u64) -> Result<String, String> {
    settings::public_url(&format!("/calls/{n}/speech"))
        .ok_or_else(|| format!("{} is not set", settings::PUBLIC_BASE_URL))
}

fn turn(role: &str, text: &str) -> Value {
    json!({ "role": role, "text": text })
}

fn push_turn(talk: &mut Value, role: &str, text: &str) {
    if let Some(turns) = talk["turns"].as_array_mut() {
        turns.push(turn(role, text));
    }
}

fn answer(call: &Call) -> Result<Response, String> {
    // A repeated webhook (the provider retries) greets again without starting over.
    let said = match &call.talk {
        Some(talk) => last_said(talk),
        None => {
            let opening = opening(call);
            let talk = json!({ "turns": [turn("assistant", &opening)], "silences": 0 });
            calls::save_talk(call.n, &talk)?;
            opening
        }
    };
    Ok(xml(twiml::ask(&said, &speech_url(call.n)?)))
}

fn last_said(talk: &Value) -> String {
    talk["turns"]
        .as_array()
        .and_then(|turns| turns.iter().rev().find(|t| t["role"] == "assistant"))
        .and_then(|t| t["text"].as_str())
        .unwrap_or("Hello?")
        .to_owned()
}

/// Ends the conversation with `outcome`, saying `text` last.
fn end(
    call: &Call,
    mut talk: Value,
    text: &str,
    outcome: &str,
    reason: &str,
) -> Result<Response, String> {
    push_turn(&mut talk, "assistant", text);
    talk["outcome"] = json!(outcome);
    talk["reason"] = json!(reason);
    calls::save_talk(call.n, &talk)?;
    if outcome == "confirmed" {
        book(call.n);
    }
    Ok(xml(twiml::finish(text)))
}

/// Queues the calendar entry of a confirmed booking; a failure to queue is recorded on the call.
fn book(n: u64) {
    if let Err(e) = jobs::enqueue(n.to_string().as_bytes()) {
        let _ = calls::save_booking(
            n,
            &json!({"status": "failed", "error": format!("cannot queue the calendar entry: {e}")}),
        );
    }
}

/// The agent's reply without its outcome marker, and the outcome it marks.
fn outcome_of(reply: &str) -> (String, Option<&'static str>) {
    let upper = reply.to_ascii_uppercase();
    let outcome = if upper.contains(CONFIRMED) {
        Some("confirmed")
    } else if upper.contains(DECLINED) {
        Some("declined")
    } else {
        None
    };
    let mut text = reply.to_owned();
    for marker in [CONFIRMED, DECLINED] {
        while let Some(at) = text.to_ascii_uppercase().find(marker) {
            text.replace_range(at..at + marker.len(), "");
        }
    }
    (cut(&text), outcome)
}

fn speech(call: &Call, params: &[(String, String)]) -> Result<Response, String> {
    let Some(mut talk) = call.talk.clone() else {
        return Err("speech arrived before the call was answered".into());
    };
    if talk["outcome"].is_string() {
        return Ok(xml(twiml::finish("Goodbye.")));
    }
    let heard = cut(field(params, "SpeechResult").unwrap_or_default());
    if heard.is_empty() {
        let silences = talk["silences"].as_u64().unwrap_or(0) + 1;
        if silences >= MAX_SILENCES {
            let text = "I will try again another time. Goodbye.";
            return end(call, talk, text, "no_answer", "no one answered the request");
        }
        talk["silences"] = json!(silences);
        calls::save_talk(call.n, &talk)?;
        let again = format!("Sorry, I did not catch that. {}", last_said(&talk));
        return Ok(xml(twiml::ask(&again, &speech_url(call.n)?)));
    }
    talk["silences"] = json!(0);
    let said_before: Vec<Value> = talk["turns"].as_array().cloned().unwrap_or_default();
    push_turn(&mut talk, "user", &heard);
    let venue_turns = said_before.iter().filter(|t| t["role"] == "user").count() + 1;
    if venue_turns > MAX_EXCHANGES {
        let text = "I am sorry, I have to end the call here. Goodbye.";
        return end(
            call,
            talk,
            text,
            "failed",
            "the conversation went on without a decision",
        );
    }
    let mut history = vec![Turn {
        role: Role::User,
        text: briefing(call),
    }];
    history.extend(said_before.iter().map(|t| Turn {
        role: if t["role"] == "assistant" {
            Role::Assistant
        } else {
            Role::User
        },
        text: t["text"].as_str().unwrap_or_default().to_owned(),
    }));
    // The call is a conversation the runtime lists; its history is the call's own record
    // (the briefing first), which the host sends as given.
    let run = agent::run_in_conversation(
        &format!("call-{}", call.n),
        &RunRequest {
            prompt: heard,
            profile: settings::get(AGENT_PROFILE),
            profile_required: false,
            history,
        },
    );
    let reply = match run {
        Ok(reply) => reply.text,
        Err(e) => {
            let text =
                "I am sorry, something went wrong on my side. I will call back later. Goodbye.";
            return end(
                call,
                talk,
                text,
                "failed",
                &format!("the agent could not answer: {}", e.message),
            );
        }
    };
    let (text, outcome) = outcome_of(&reply);
    let text = match text.is_empty() {
        true => "Thank you. Goodbye.".to_owned(),
        false => text,
    };
    match outcome {
        Some("confirmed") => end(
            call,
            talk,
            &text,
            "confirmed",
            "the venue confirmed the booking",
        ),
        Some(_) => end(
            call,
            talk,
            &text,
            "declined",
            "the venue could not take the booking",
        ),
        None => {
            push_turn(&mut talk, "assistant", &text);
            calls::save_talk(call.n, &talk)?;
            Ok(xml(twiml::ask(&text, &speech_url(call.n)?)))
        }
    }
}

fn status(call: &Call, params: &[(String, String)]) -> Result<Response, String> {
    let Some(status) = field(params, "CallStatus") else {
        return Ok(Response::error(400, "a status callback without CallStatus"));
    };
    let mut record = json!({ "status": cut(status) });
    if let Some(duration) = field(params, "CallDuration").and_then(|d| d.parse::<u64>().ok()) {
        record["duration_secs"] = json!(duration);
    }
    calls::save_status(call.n, &record)?;
    Ok(Response::new(204, "text/plain", Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_outcome_marker() {
        assert_eq!(
            outcome_of("Wonderful, thank you! Goodbye. [CONFIRMED]"),
            (
                "Wonderful, thank you! Goodbye.".to_owned(),
                Some("confirmed")
            )
        );
        assert_eq!(outcome_of("[declined] Thanks anyway.").1, Some("declined"));
        assert_eq!(
            outcome_of("Could you do 8 instead?"),
            ("Could you do 8 instead?".to_owned(), None)
        );
        assert_eq!(outcome_of("[CONFIRMED]").0, "");
    }

    #[test]
    fn speaks_the_request() {
        let call = Call {
            n: 3,
            request: json!({"venue_name": "Chez Nous", "party_size": 4, "reservation_datetime": "2026-11-28T19:30", "notes": "Name: Ana"}),
            talk: None,
            status: None,
            booking: None,
        };
        assert!(
            opening(&call).contains("a table for 4 people on Saturday, November 28 at 7:30 PM")
        );
        let briefing = briefing(&call);
        assert!(briefing.contains("Chez Nous") && briefing.contains("Name: Ana"));
        assert!(briefing.contains(CONFIRMED) && briefing.contains(DECLINED));
    }
}
