//! The polling loop. Each poll logs in, takes a bounded batch of unhandled messages (oldest
//! first), answers or skips each, and logs out. A failure goes on the registry entry and the
//! poll is tried again later, with a growing pause; a refused login stops polling for good.
//!
//! Stopping is prompt: every network step races the stop signal and the agent run is
//! cancelled. The one step that does not race it is sending a reply and marking it
//! `\Answered`, so an accepted reply is not left unmarked by a stop.

use std::sync::Arc;
use std::time::Duration;

use service_contract::{
    AdapterContext, ProfileChoice, RunFailure, RunFailureKind, RunReply, RunRequest, TaskState,
};
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::config::{Config, MAX_MESSAGE_BYTES};
use crate::failure::{Failure, Kind};
use crate::incoming::Incoming;
use crate::mailbox::{Mailbox, Mark, Waiting};
use crate::metadata::{ANSWERED, LAST_SKIPPED, POLLS, SKIPPED};
use crate::outbox::{Outbox, Reply};
use crate::screen::refusal;
use crate::texts::{failure_notice, prompt, reply_text, task_title};
use crate::thread::{reply_subject, threading};

/// The longest pause between retries after failures.
const MAX_RETRY: Duration = Duration::from_secs(300);

/// Why a poll ended early.
enum Halt {
    Stopped,
    Failed(Failure),
}

impl From<Failure> for Halt {
    fn from(failure: Failure) -> Self {
        Self::Failed(failure)
    }
}

/// More messages were waiting than one batch takes.
struct MoreWaiting(bool);

pub struct Worker {
    ctx: Arc<AdapterContext>,
    config: Config,
    outbox: Outbox,
    stop: CancellationToken,
    /// Replies sent whose `\Answered` could not be stored yet, as (UID validity, UID): marked
    /// first thing on the next poll, so the connection dropping is no reason to answer twice.
    unmarked: Vec<(u32, u32)>,
    polls: u64,
    answered: u64,
    skipped: u64,
}

impl Worker {
    pub fn new(
        ctx: Arc<AdapterContext>,
        config: Config,
        outbox: Outbox,
        stop: CancellationToken,
    ) -> Self {
        let carried = |key: &str| {
            ctx.registry
                .get(NAME)
                .and_then(|entry| entry.metadata.get(key)?.parse().ok())
                .unwrap_or(0)
        };
        Self {
            polls: carried(POLLS),
            answered: carried(ANSWERED),
            skipped: carried(SKIPPED),
            ctx,
            config,
            outbox,
            stop,
            unmarked: Vec::new(),
        }
    }

    pub async fn run(mut self) {
        let mut retry = self.config.poll;
        loop {
            let pause = match self.poll().await {
                Ok(MoreWaiting(true)) => Duration::ZERO,
                Ok(MoreWaiting(false)) => {
                    retry = self.config.poll;
                    self.config.poll
                }
                Err(Halt::Stopped) => return,
                Err(Halt::Failed(failure)) if failure.is_final() => {
                    self.record(&failure);
                    return;
                }
                Err(Halt::Failed(failure)) => {
                    let message = format!("{}; retrying in {} s", failure.message, retry.as_secs());
                    self.record(&Failure::new(failure.kind, message));
                    let pause = retry;
                    retry = (retry * 2).min(MAX_RETRY.max(self.config.poll));
                    pause
                }
            };
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.stop.cancelled() => return,
            }
        }
    }

    async fn poll(&mut self) -> Result<MoreWaiting, Halt> {
        let mut mailbox = self.unless_stopped(Mailbox::open(&self.config)).await?;
        self.ctx.registry.mark_running(NAME);
        let outcome = self.work(&mut mailbox).await;
        // Once stopped, the connection is simply dropped.
        if !matches!(outcome, Err(Halt::Stopped)) {
            mailbox.close().await;
        }
        if outcome.is_ok() {
            self.polls += 1;
            self.count(POLLS, self.polls);
        }
        outcome
    }

    async fn work(&mut self, mailbox: &mut Mailbox) -> Result<MoreWaiting, Halt> {
        self.mark_sent_replies(mailbox).await?;
        let limits = self.config.limits;
        let uids = self
            .unless_stopped(mailbox.unhandled(limits.max_age_days))
            .await?;
        let batch = &uids[..uids.len().min(limits.max_per_poll)];
        let waiting = self.unless_stopped(mailbox.waiting(batch)).await?;
        let mut smtp_checked = false;
        for message in waiting {
            self.handle(mailbox, message, &mut smtp_checked).await?;
        }
        Ok(MoreWaiting(uids.len() > batch.len()))
    }

    async fn mark_sent_replies(&mut self, mailbox: &mut Mailbox) -> Result<(), Halt> {
        // After a UIDVALIDITY change those numbers name other messages, or none.
        let validity = mailbox.uid_validity;
        self.unmarked.retain(|(v, _)| *v == validity);
        while let Some(&(_, uid)) = self.unmarked.last() {
            self.unless_stopped(mailbox.mark(uid, Mark::Answered))
                .await?;
            self.unmarked.pop();
        }
        Ok(())
    }

    async fn handle(
        &mut self,
        mailbox: &mut Mailbox,
        message: Waiting,
        smtp_checked: &mut bool,
    ) -> Result<(), Halt> {
        let uid = message.uid;
        let max_bytes = self.config.limits.max_message_bytes;
        if message.size > max_bytes {
            let reason = format!(
                "it has {} bytes, more than {MAX_MESSAGE_BYTES} ({max_bytes})",
                message.size
            );
            return self.skip(mailbox, uid, None, &reason).await;
        }
        let raw = self.unless_stopped(mailbox.content(uid)).await?;
        let Some(incoming) = Incoming::parse(&raw, self.config.limits.max_prompt_chars) else {
            return self
                .skip(mailbox, uid, None, "it could not be read as a message")
                .await;
        };
        if let Some(reason) = refusal(&incoming, &self.config.address, &self.config.allowed) {
            return self
                .skip(mailbox, uid, incoming.from.as_deref(), &reason)
                .await;
        }
        if !*smtp_checked {
            self.unless_stopped(self.outbox.check()).await?;
            *smtp_checked = true;
        }
        if message.claimed {
            tracing::info!(
                adapter = NAME,
                uid,
                "message was claimed before but never answered; answering it now"
            );
        } else {
            self.unless_stopped(mailbox.mark(uid, Mark::Claimed))
                .await?;
        }
        self.answer(mailbox, uid, &incoming).await
    }

    async fn answer(
        &mut self,
        mailbox: &mut Mailbox,
        uid: u32,
        incoming: &Incoming,
    ) -> Result<(), Halt> {
        self.ctx.registry.touch(NAME);
        let task = Task::create(&self.ctx, &task_title(incoming), &self.config.profile).await;
        task.moved(TaskState::Running, None).await;
        let (state, text, trace_id) = match self.ask(prompt(incoming), incoming.thread()).await {
            Ok(RunReply { trace_id, text }) => {
                (TaskState::Completed, reply_text(text), Some(trace_id))
            }
            Err(failure) if failure.kind == RunFailureKind::Cancelled => {
                task.moved(TaskState::Cancelled, failure.trace_id.as_deref())
                    .await;
                return Err(Halt::Stopped);
            }
            Err(failure) => (TaskState::Error, failure_notice(&failure), failure.trace_id),
        };
        let trace_id = trace_id.as_deref();
        let reply = Reply {
            to: incoming.reply_address().unwrap_or_default().to_owned(),
            subject: reply_subject(&incoming.subject),
            threading: threading(incoming),
            text,
        };
        // From here on the stop is not raced: a reply the server accepted must get its mark.
        if let Err(failure) = self.outbox.send(&reply).await {
            task.moved(TaskState::Error, trace_id).await;
            if failure.kind != Kind::Smtp {
                return Err(failure.into());
            }
            // Refused for good (a bad recipient, a policy): trying again would not help.
            self.record(&failure);
            return self
                .skip(mailbox, uid, incoming.from.as_deref(), &failure.message)
                .await;
        }
        let marked = mailbox.mark(uid, Mark::Answered).await;
        task.moved(state, trace_id).await;
        if let Err(failure) = marked {
            self.unmarked.push((mailbox.uid_validity, uid));
            return Err(failure.into());
        }
        self.answered += 1;
        self.count(ANSWERED, self.answered);
        Ok(())
    }

    /// Runs the profile, or the server defaults when no profile has that name, as the next turn
    /// of the conversation of the mail's thread (the runtime keeps its messages).
    async fn ask(&self, prompt: String, thread: Option<String>) -> Result<RunReply, RunFailure> {
        let profile = ProfileChoice::Preferred(self.config.profile.clone());
        let request = RunRequest {
            conversation: thread,
            ..RunRequest::new(prompt, profile, NAME)
        };
        let outcome = self.ctx.agents.run(request, self.stop.child_token()).await;
        if let Err(failure) = &outcome
            && failure.kind != RunFailureKind::Cancelled
        {
            tracing::warn!(adapter = NAME, trace = ?failure.trace_id, "a run failed: {failure}");
        }
        outcome
    }

    /// Marks the message as one that will not be answered, and says why on the entry.
    async fn skip(
        &mut self,
        mailbox: &mut Mailbox,
        uid: u32,
        from: Option<&str>,
        reason: &str,
    ) -> Result<(), Halt> {
        self.unless_stopped(mailbox.mark(uid, Mark::Skipped))
            .await?;
        let from = from.map_or_else(String::new, |from| format!(" from {from}"));
        let note = self
            .config
            .password
            .scrub(&format!("message {uid}{from} was not answered: {reason}"));
        tracing::info!(adapter = NAME, "{note}");
        self.skipped += 1;
        self.count(SKIPPED, self.skipped);
        let registry = &self.ctx.registry;
        registry.set_metadata(NAME, LAST_SKIPPED, &note);
        registry.touch(NAME);
        Ok(())
    }

    async fn unless_stopped<T>(
        &self,
        step: impl Future<Output = Result<T, Failure>>,
    ) -> Result<T, Halt> {
        tokio::select! {
            biased;
            () = self.stop.cancelled() => Err(Halt::Stopped),
            outcome = step => outcome.map_err(Halt::Failed),
        }
    }

    fn count(&self, key: &str, value: u64) {
        self.ctx
            .registry
            .set_metadata(NAME, key, &value.to_string());
    }

    /// Logs a failure and records it on the entry, with the password taken out.
    fn record(&self, failure: &Failure) {
        let message = self.config.password.scrub(&failure.message);
        tracing::warn!(adapter = NAME, "{}: {message}", failure.kind.name());
        self.ctx
            .registry
            .mark_error(NAME, failure.kind.name(), &message);
    }
}

/// The task record of one answered message. `id` is `None` when it could not be written; the
/// answer goes out regardless.
struct Task<'a> {
    ctx: &'a AdapterContext,
    id: Option<String>,
}

impl<'a> Task<'a> {
    async fn create(ctx: &'a AdapterContext, title: &str, profile: &str) -> Self {
        let id = match ctx.tasks.create(title, Some(profile)).await {
            Ok(id) => Some(id),
            Err(error) => {
                tracing::warn!(
                    adapter = NAME,
                    "could not record the task {title:?}: {error}"
                );
                None
            }
        };
        Self { ctx, id }
    }

    async fn moved(&self, state: TaskState, trace_id: Option<&str>) {
        if let Some(id) = &self.id
            && let Err(error) = self.ctx.tasks.update(id, state, trace_id).await
        {
            tracing::warn!(adapter = NAME, task = %id, "could not update the task: {error}");
        }
    }
}
