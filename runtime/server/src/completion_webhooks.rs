//! Completion webhooks of runs, signed per the Standard Webhooks specification: when a run
//! with a `webhook` ends, its outcome is POSTed there with `webhook-id`, `webhook-timestamp`
//! and `webhook-signature` (HMAC-SHA256 with `SERVICE_WEBHOOK_SIGNING_SECRET`). Deliveries
//! live in the database (see [`store`]): any replica delivers them, at least once, across
//! restarts and kill -9, with retries and backoff, through the outbound policy (no private or
//! loopback addresses unless `[webhooks] allow_private`, no redirects followed, a timeout).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::WebhooksSection;
use crate::db::Db;
use crate::settings_store::SettingsStore;
use crate::{runs, traces};
use service_store::net::{Guard, refused_by_guard};
use service_store::run_webhooks::{self as store, Due, Next};

/// The secret webhooks are signed with: `whsec_` and base64, as the specification writes it.
pub const SECRET_VARIABLE: &str = "SERVICE_WEBHOOK_SIGNING_SECRET";
/// The most a webhook's body holds; a longer answer is cut to fit (`answer_truncated`).
pub const MAX_BODY_BYTES: usize = 256 << 10;
/// The longest webhook URL taken.
const MAX_URL_CHARS: usize = 2048;
/// How often deliverers look for runs that ended on other replicas (or while none ran).
const POLL_EVERY: Duration = Duration::from_secs(1);
/// Deliveries under way at once on a replica.
const AT_ONCE: usize = 16;
/// How long a delivery stays with its deliverer beyond its timeout before another takes it.
const LEASE_MARGIN: Duration = Duration::from_secs(30);

pub struct RunWebhooks {
    db: Db,
    env: Arc<SettingsStore>,
    settings: WebhooksSection,
    /// The address policy; none with `[webhooks] allow_private`.
    guard: Option<Guard>,
    replica: String,
    wake: Notify,
}

impl RunWebhooks {
    pub fn new(
        db: Db,
        env: Arc<SettingsStore>,
        settings: WebhooksSection,
        replica: String,
    ) -> Self {
        Self {
            db,
            env,
            settings,
            guard: (!settings.allow_private()).then(|| Guard::new([])),
            replica,
            wake: Notify::new(),
        }
    }

    /// The deliverers' client: through the policy, no redirects followed, the attempt's
    /// timeout. Made when the server starts delivering, so a command pays nothing for it.
    fn client(&self) -> reqwest::Result<reqwest::Client> {
        match &self.guard {
            Some(guard) => guard.client_builder(),
            None => reqwest::Client::builder(),
        }
        .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .timeout(self.settings.timeout())
        .build()
    }

    /// The signing key: the secret's bytes after `whsec_`.
    fn key(&self) -> Result<Vec<u8>, String> {
        let secret = self.env.get(SECRET_VARIABLE).ok_or_else(|| {
            format!("completion webhooks are signed, and {SECRET_VARIABLE} is not set")
        })?;
        let encoded = secret.strip_prefix("whsec_").unwrap_or(&secret).trim();
        STANDARD
            .decode(encoded)
            .or_else(|_| STANDARD_NO_PAD.decode(encoded))
            .ok()
            .filter(|key| key.len() >= 16)
            .ok_or_else(|| {
                format!(
                    "{SECRET_VARIABLE} must be whsec_ followed by the base64 of at least 16 \
                     random bytes"
                )
            })
    }

    /// Whether a run may be given `url` as its webhook: http(s), allowed by the policy as it
    /// resolves now, and a secret to sign with.
    pub async fn check(&self, url: &str) -> Result<(), String> {
        if url.chars().count() > MAX_URL_CHARS {
            return Err(format!(
                "a webhook URL is at most {MAX_URL_CHARS} characters"
            ));
        }
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "a webhook URL is http or https, not {}:",
                parsed.scheme()
            ));
        }
        self.key()?;
        if let Some(guard) = &self.guard {
            guard.check_url_resolved(&parsed).await.map_err(|e| {
                format!("{e} (set [webhooks] allow_private = true to call such receivers)")
            })?;
        }
        Ok(())
    }

    /// Looks for due deliveries now (a run ended here).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Delivers what is due, until `stop`. Deliveries cut by the stop are made again by
    /// whichever deliverer takes them once their lease runs out.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let client = match self.client() {
            Ok(client) => client,
            Err(e) => {
                tracing::error!("cannot deliver runs' webhooks: {e}");
                return;
            }
        };
        let slots = Arc::new(Semaphore::new(AT_ONCE));
        let lease_ms = (self.settings.timeout() + LEASE_MARGIN).as_millis() as i64;
        // This replica just started: nothing it held is under way any more.
        let holder = self.replica.clone();
        if let Err(e) = self
            .db
            .call(move |conn| store::release(conn, &holder))
            .await
        {
            tracing::warn!("cannot release this replica's earlier webhook deliveries: {e}");
        }
        loop {
            let free = slots.available_permits() as u32;
            // Without a key nothing can be signed: deliveries wait for one.
            if free > 0 && self.key().is_ok() {
                let holder = self.replica.clone();
                let claimed = self
                    .db
                    .call(move |conn| store::claim_due(conn, &holder, lease_ms, free))
                    .await;
                match claimed {
                    Ok(due) => {
                        let more = due.len() as u32 == free;
                        for due in due {
                            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                                return;
                            };
                            let (this, client) = (Arc::clone(&self), client.clone());
                            tokio::spawn(async move {
                                this.deliver(&client, due).await;
                                drop(slot);
                                this.wake();
                            });
                        }
                        if more {
                            continue;
                        }
                    }
                    Err(e) => tracing::warn!("cannot look for due webhooks: {e}"),
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(POLL_EVERY) => {}
            }
        }
    }

    /// Makes one attempt and records it.
    async fn deliver(&self, client: &reqwest::Client, due: Due) {
        let started = Instant::now();
        let (status, error) = match self.attempt(client, &due).await {
            Ok(status) if (200..300).contains(&status) => (Some(status), None),
            Ok(status) if (300..400).contains(&status) => (
                Some(status),
                Some(format!(
                    "the receiver answered {status}; redirects are not followed"
                )),
            ),
            Ok(status) => (
                Some(status),
                Some(format!("the receiver answered {status}")),
            ),
            Err(e) => (None, Some(e)),
        };
        let next = match (&error, due.attempt) {
            (None, _) => Next::Delivered,
            (Some(_), attempt) if attempt >= self.settings.max_attempts() => Next::GaveUp,
            (Some(_), attempt) => {
                Next::RetryIn(self.settings.retry_after(attempt).as_millis() as i64)
            }
        };
        let took = started.elapsed().as_millis() as i64;
        match &next {
            Next::Delivered => {
                tracing::info!(run = %due.task_id, attempt = due.attempt, "delivered a run's webhook")
            }
            Next::RetryIn(ms) => {
                tracing::info!(run = %due.task_id, attempt = due.attempt, retry_in_ms = ms, "a run's webhook failed: {}", error.as_deref().unwrap_or_default())
            }
            Next::GaveUp => {
                tracing::warn!(run = %due.task_id, attempt = due.attempt, "gave up a run's webhook: {}", error.as_deref().unwrap_or_default())
            }
        }
        let holder = self.replica.clone();
        let recorded = self
            .db
            .call(move |conn| {
                store::record(conn, &due, &holder, (status, error.as_deref(), took), next)
            })
            .await;
        if let Err(e) = recorded {
            tracing::warn!("cannot record a webhook's attempt: {e}");
        }
    }

    /// Sends the run's outcome once; the receiver's status, or why there was none.
    async fn attempt(&self, client: &reqwest::Client, due: &Due) -> Result<u16, String> {
        let key = self.key()?;
        let body = self.body(&due.task_id).await?;
        let id = format!("msg_{}", due.task_id);
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let signature = sign(&key, &id, timestamp, &body);
        let sent = client
            .post(&due.url)
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        match sent {
            // The answer's body is not read: only its status counts.
            Ok(response) => Ok(response.status().as_u16()),
            Err(e) if refused_by_guard(&e) => Err(
                "refused: the receiver's host resolves to a private or local address \
                 ([webhooks] allow_private is false)"
                    .to_owned(),
            ),
            Err(e) if e.is_timeout() => Err(format!(
                "no answer within {} ms ([webhooks] timeout_ms)",
                self.settings.timeout().as_millis()
            )),
            Err(e) => Err(format!("cannot reach the receiver: {}", e.without_url())),
        }
    }

    /// The webhook's body: the run's outcome, the same at every attempt.
    async fn body(&self, run_id: &str) -> Result<String, String> {
        let id = run_id.to_owned();
        let (run, answer) = self
            .db
            .call(move |conn| {
                let Some(run) = runs::get(conn, &id)? else {
                    return Ok((None, None));
                };
                let answer = traces::get(conn, &run.trace_id)?.and_then(|t| t.response);
                Ok((Some(run), answer))
            })
            .await
            .map_err(|e| format!("cannot read the run: {e}"))?;
        let run = run.ok_or_else(|| format!("run {run_id:?} is gone"))?;
        Ok(payload(&run, answer))
    }
}

/// The body of a run's webhook (`type`, `timestamp`, `data`, as the specification suggests),
/// its answer cut to keep it within [`MAX_BODY_BYTES`].
fn payload(run: &runs::Run, answer: Option<String>) -> String {
    let mut body = json!({
        "type": format!("run.{}", run.status),
        "timestamp": run.updated_at,
        "data": {
            "run_id": run.run_id,
            "status": run.status,
            "conversation_id": run.conversation_id,
            "trace_id": run.trace_id,
            "agent": run.agent,
            "answer": Value::Null,
            "error": (run.status != "completed").then_some(run.description.as_deref()).flatten(),
            "metadata": run.metadata,
        },
    });
    let Some(answer) = answer else {
        return body.to_string();
    };
    // The answer's room: what is left besides everything else (its quotes and escapes
    // included, by measuring it as JSON).
    let room = MAX_BODY_BYTES.saturating_sub(body.to_string().len() + 32);
    let encoded = Value::String(answer.clone()).to_string().len();
    if encoded <= room {
        body["data"]["answer"] = Value::String(answer);
    } else {
        let (mut cut, mut encoded) = (answer, encoded);
        while encoded > room {
            // In proportion to what escaping adds, and at least one byte shorter.
            let keep = cut.len() * room / encoded;
            let mut at = keep.min(cut.len().saturating_sub(1));
            while !cut.is_char_boundary(at) {
                at -= 1;
            }
            cut.truncate(at);
            encoded = Value::String(cut.clone()).to_string().len();
        }
        body["data"]["answer"] = Value::String(cut);
        body["data"]["answer_truncated"] = Value::Bool(true);
    }
    body.to_string()
}

/// `v1,` and the base64 of HMAC-SHA256 over `{id}.{timestamp}.{body}`.
fn sign(key: &[u8], id: &str, timestamp: u64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_the_specification_example() {
        // The example of the Standard Webhooks specification.
        let key = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_long_answer_is_cut_to_the_bound() {
        let run = runs::Run {
            run_id: "r".into(),
            conversation_id: "c".into(),
            trace_id: "t".into(),
            status: "completed",
            agent: Some("default".into()),
            metadata: None,
            started_by: None,
            created_at: "now".into(),
            updated_at: "now".into(),
            description: None,
        };
        let body = payload(&run, Some("\"é\n".repeat(200_000)));
        assert!(body.len() <= MAX_BODY_BYTES, "{}", body.len());
        let value: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(value["data"]["answer_truncated"], true);
        assert!(value["data"]["answer"].as_str().unwrap().len() > 100_000);
        let small = payload(&run, Some("hi".into()));
        assert_eq!(
            serde_json::from_str::<Value>(&small).unwrap()["data"]["answer"],
            "hi"
        );
    }
}
