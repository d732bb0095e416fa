//! `jobs`: persists deferred work; the job worker runs it later in a fresh instance. Each
//! adapter has a bound on its pending jobs and on a payload's size.

use serde::Deserialize;
use serde_json::json;
use wasmtime::component::Linker;

use super::super::bindings::{latest, v0_1};
use super::super::grants::{LimitKey, Request};
use super::super::state::HostState;
use super::{Capability, denied, link_versions, on_host, over_quota};
use crate::bus::Event;
use crate::db::Conn;
use crate::job_queue::{self, Refused};
use crate::telemetry::propagation;
use latest::service::adapter::types::Error;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    #[serde(default)]
    jobs: bool,
    #[serde(default)]
    limits: Limits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Jobs waiting or running at once.
    pub jobs_pending: u32,
    pub job_payload_bytes: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            jobs_pending: 1_000,
            job_payload_bytes: 64 << 10,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    pub allowed: bool,
    pub limits: Limits,
}

pub struct Jobs;

impl Capability for Jobs {
    const INTERFACE: &'static str = "jobs";
    const KEYS: &'static [&'static str] = &["jobs"];
    const LIMIT_KEYS: &'static [LimitKey] = &[
        LimitKey {
            name: "jobs_pending",
            max: 1_000_000,
        },
        LimitKey {
            name: "job_payload_bytes",
            max: 16 << 20,
        },
    ];
    type Grant = Grant;
    type Granted = Granted;
    type State = ();

    fn grant(
        request: &Request,
        grant: &Grant,
        _: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Granted, String> {
        Ok(Granted {
            allowed: grant.jobs && request.wants(Self::INTERFACE, |l| l.jobs),
            limits: grant.limits,
        })
    }

    fn granted_anything(granted: &Granted) -> bool {
        granted.allowed
    }

    fn summary(granted: &Granted) -> Vec<String> {
        if granted.allowed {
            vec!["jobs".into()]
        } else {
            Vec::new()
        }
    }

    fn state(_: &Granted) -> anyhow::Result<()> {
        Ok(())
    }

    fn suggest(_: &Request) -> Vec<String> {
        vec!["jobs = true".into()]
    }

    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        link_versions!(linker, jobs)
    }
}

impl HostState {
    /// The jobs grant's limits, when it allows `what` with a payload of `payload_len` bytes.
    pub(super) fn jobs_limits(&self, what: &str, payload_len: usize) -> Result<Limits, Error> {
        let granted = &self.caller.granted.jobs;
        if !granted.allowed {
            return Err(denied(self, format!("{what} without the jobs grant")));
        }
        let limits = granted.limits;
        if payload_len > limits.job_payload_bytes as usize {
            return Err(over_quota(
                self,
                format!(
                    "a job payload of {payload_len} bytes is larger than {} (limits.job_payload_bytes)",
                    limits.job_payload_bytes
                ),
            ));
        }
        Ok(limits)
    }

    /// Runs a queueing `op` with the database, then wakes the job workers if it queued a job.
    /// Written before the handler's response leaves, so an accepted job survives a crash. A
    /// few single-row statements: inline, like kv's (a hop to the blocking pool cost more than
    /// the whole call of a retried event).
    async fn queue<T: Queued + Send + 'static>(
        &mut self,
        op: impl FnOnce(&mut Conn<'_>, &str) -> Result<T, Refused> + Send + 'static,
    ) -> Result<T, Error> {
        let caller = self.caller.clone();
        let queued = on_host(self, async move {
            let adapter = caller.adapter.clone();
            let queued = caller
                .services
                .db
                .call_inline(move |conn| Ok(op(conn, &adapter)))
                .await;
            if matches!(&queued, Ok(Ok(value)) if value.queued()) {
                caller.services.bus.publish_coalesced(Event::JobsReady);
            }
            queued
        })
        .await;
        match queued {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(refused @ (Refused::Full { .. } | Refused::KvQuota(_)))) => {
                Err(over_quota(self, refused.to_string()))
            }
            Ok(Err(Refused::Db(e))) | Err(e) => Err(Error::Failed(e.to_string())),
        }
    }
}

/// What a queueing operation answers: whether it queued a job.
trait Queued {
    fn queued(&self) -> bool;
}

/// `enqueue`: the new job's id.
impl Queued for String {
    fn queued(&self) -> bool {
        true
    }
}

/// `enqueue-once`: `None` when the key was claimed already and nothing was queued.
impl Queued for Option<String> {
    fn queued(&self) -> bool {
        self.is_some()
    }
}

impl latest::service::adapter::jobs::Host for HostState {
    async fn enqueue(&mut self, payload: Vec<u8>) -> wasmtime::Result<Result<String, Error>> {
        let args = self.args(|| json!({"payload": payload}));
        if let Some(answer) = self.replayed("jobs.enqueue", &args)? {
            return Ok(answer);
        }
        let queued = self.enqueue_now(payload).await;
        self.taped("jobs.enqueue", args, &queued);
        Ok(queued)
    }

    async fn enqueue_once(
        &mut self,
        key: String,
        ttl_ms: u64,
        payload: Vec<u8>,
    ) -> wasmtime::Result<Result<Option<String>, Error>> {
        let args = self.args(|| json!({"key": key, "ttl_ms": ttl_ms, "payload": payload}));
        if let Some(answer) = self.replayed("jobs.enqueue-once", &args)? {
            return Ok(answer);
        }
        let queued = self.enqueue_once_now(key, ttl_ms, payload).await;
        self.taped("jobs.enqueue-once", args, &queued);
        Ok(queued)
    }
}

impl HostState {
    async fn enqueue_now(&mut self, payload: Vec<u8>) -> Result<String, Error> {
        self.heavy(payload.len()).await;
        let limits = self.jobs_limits("jobs.enqueue", payload.len())?;
        // Its run continues the trace of the call that queued it.
        let traceparent = propagation::traceparent();
        self.queue(move |conn, adapter| {
            job_queue::enqueue(
                conn,
                adapter,
                &payload,
                traceparent.as_deref(),
                limits.jobs_pending,
            )
        })
        .await
    }

    async fn enqueue_once_now(
        &mut self,
        key: String,
        ttl_ms: u64,
        payload: Vec<u8>,
    ) -> Result<Option<String>, Error> {
        self.heavy(key.len() + payload.len()).await;
        let limits = self.jobs_limits("jobs.enqueue-once", payload.len())?;
        let kv_quota = self.kv_quota("jobs.enqueue-once", &key, 0)?;
        let traceparent = propagation::traceparent();
        self.queue(move |conn, adapter| {
            let once = job_queue::Once {
                key: &key,
                ttl_ms,
                payload: &payload,
                traceparent: traceparent.as_deref(),
            };
            job_queue::enqueue_once(conn, adapter, &once, limits.jobs_pending, kv_quota)
        })
        .await
    }
}

impl v0_1::service::adapter::jobs::Host for HostState {
    async fn enqueue(&mut self, payload: Vec<u8>) -> wasmtime::Result<Result<String, String>> {
        let queued = latest::service::adapter::jobs::Host::enqueue(self, payload).await?;
        Ok(queued.map_err(|e| super::trap(e).to_string()))
    }
}
