//! `kv`: the adapter's own namespace of the persisted key-value store, within its bounds: key
//! and value sizes, and the bytes it stores in all.

use serde::Deserialize;
use serde_json::json;
use wasmtime::component::Linker;

use super::super::bindings::{latest, v0_1};
use super::super::grants::{LimitKey, Request};
use super::super::state::HostState;
use super::{Capability, denied, link_versions, on_host, over_quota, trap};
use crate::kv_store::{self, Refused};
use latest::service::adapter::types::Error;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    #[serde(default)]
    kv: bool,
    #[serde(default)]
    limits: Limits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub kv_key_bytes: u32,
    pub kv_value_bytes: u32,
    pub kv_total_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            kv_key_bytes: 512,
            kv_value_bytes: 256 << 10,
            kv_total_bytes: 16 << 20,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    pub allowed: bool,
    pub limits: Limits,
}

pub struct Kv;

impl Capability for Kv {
    const INTERFACE: &'static str = "kv";
    const KEYS: &'static [&'static str] = &["kv"];
    const LIMIT_KEYS: &'static [LimitKey] = &[
        LimitKey {
            name: "kv_key_bytes",
            max: 4 << 10,
        },
        LimitKey {
            name: "kv_value_bytes",
            max: 16 << 20,
        },
        LimitKey {
            name: "kv_total_bytes",
            max: 4 << 30,
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
            allowed: grant.kv && request.wants(Self::INTERFACE, |l| l.kv),
            limits: grant.limits,
        })
    }

    fn granted_anything(granted: &Granted) -> bool {
        granted.allowed
    }

    fn summary(granted: &Granted) -> Vec<String> {
        if granted.allowed {
            vec!["kv".into()]
        } else {
            Vec::new()
        }
    }

    fn state(_: &Granted) -> anyhow::Result<()> {
        Ok(())
    }

    fn suggest(_: &Request) -> Vec<String> {
        vec!["kv = true".into()]
    }

    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        link_versions!(linker, kv)
    }
}

impl HostState {
    /// The adapter's key-value quota in bytes, when its grant allows `what` to write `key`
    /// (and a value of `value_len` bytes).
    pub(super) fn kv_quota(&self, what: &str, key: &str, value_len: usize) -> Result<u64, Error> {
        let granted = &self.caller.granted.kv;
        if !granted.allowed {
            return Err(denied(self, format!("{what} without the kv grant")));
        }
        let limits = granted.limits;
        if key.len() > limits.kv_key_bytes as usize {
            return Err(over_quota(
                self,
                format!(
                    "a key of {} bytes is longer than {} (limits.kv_key_bytes)",
                    key.len(),
                    limits.kv_key_bytes
                ),
            ));
        }
        if value_len > limits.kv_value_bytes as usize {
            return Err(over_quota(
                self,
                format!(
                    "a value of {value_len} bytes is larger than {} (limits.kv_value_bytes)",
                    limits.kv_value_bytes
                ),
            ));
        }
        Ok(limits.kv_total_bytes)
    }

    /// Runs a store operation in the adapter's namespace after the grant and size checks.
    async fn with_kv<T: Send + 'static>(
        &mut self,
        key: &str,
        value_len: usize,
        op: impl FnOnce(&mut crate::db::Conn<'_>, &str, u64) -> Result<T, Refused> + Send + 'static,
    ) -> Result<T, Error> {
        let quota = self.kv_quota("kv", key, value_len)?;
        let caller = self.caller.clone();
        let done = on_host(self, async move {
            let adapter = caller.adapter.clone();
            caller
                .services
                .db
                .call_inline(move |conn| Ok(op(conn, &adapter, quota)))
                .await
        })
        .await;
        match done {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(refused @ Refused::OverQuota { .. })) => {
                Err(over_quota(self, refused.to_string()))
            }
            Ok(Err(Refused::Db(e))) | Err(e) => Err(Error::Failed(e.to_string())),
        }
    }
}

impl latest::service::adapter::kv::Host for HostState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        let args = self.args(|| json!({"key": key}));
        if let Some(answer) = self.replayed("kv.get", &args)? {
            return Ok(answer);
        }
        let read = key.clone();
        let got = self
            .with_kv(&key, 0, move |conn, adapter, _| {
                Ok(kv_store::get(conn, adapter, &read)?)
            })
            .await;
        self.taped("kv.get", args, &got);
        Ok(got)
    }

    async fn set(
        &mut self,
        key: String,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
    ) -> wasmtime::Result<Result<(), Error>> {
        self.heavy(key.len() + value.len()).await;
        let args = self.args(|| json!({"key": key, "value": value, "ttl_ms": ttl_ms}));
        if let Some(answer) = self.replayed("kv.set", &args)? {
            return Ok(answer);
        }
        let written = key.clone();
        let set = self
            .with_kv(&key, value.len(), move |conn, adapter, quota| {
                kv_store::set(conn, adapter, &written, &value, ttl_ms, quota)
            })
            .await;
        self.taped("kv.set", args, &set);
        Ok(set)
    }

    async fn delete(&mut self, key: String) -> wasmtime::Result<Result<(), Error>> {
        let args = self.args(|| json!({"key": key}));
        if let Some(answer) = self.replayed("kv.delete", &args)? {
            return Ok(answer);
        }
        let deleted = key.clone();
        let done = self
            .with_kv(&key, 0, move |conn, adapter, _| {
                Ok(kv_store::delete(conn, adapter, &deleted)?)
            })
            .await;
        self.taped("kv.delete", args, &done);
        Ok(done)
    }

    async fn claim(&mut self, key: String, ttl_ms: u64) -> wasmtime::Result<Result<bool, Error>> {
        let args = self.args(|| json!({"key": key, "ttl_ms": ttl_ms}));
        if let Some(answer) = self.replayed("kv.claim", &args)? {
            return Ok(answer);
        }
        let claimed = key.clone();
        let won = self
            .with_kv(&key, 0, move |conn, adapter, quota| {
                kv_store::claim(conn, adapter, &claimed, ttl_ms, quota)
            })
            .await;
        self.taped("kv.claim", args, &won);
        Ok(won)
    }
}

/// 0.1's functions had no error results: a refusal traps the call (and is on the entry).
impl v0_1::service::adapter::kv::Host for HostState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        latest::service::adapter::kv::Host::get(self, key)
            .await?
            .map_err(trap)
    }

    async fn set(
        &mut self,
        key: String,
        value: Vec<u8>,
        ttl_ms: Option<u64>,
    ) -> wasmtime::Result<()> {
        latest::service::adapter::kv::Host::set(self, key, value, ttl_ms)
            .await?
            .map_err(trap)
    }

    async fn delete(&mut self, key: String) -> wasmtime::Result<()> {
        latest::service::adapter::kv::Host::delete(self, key)
            .await?
            .map_err(trap)
    }

    async fn claim(&mut self, key: String, ttl_ms: u64) -> wasmtime::Result<bool> {
        latest::service::adapter::kv::Host::claim(self, key, ttl_ms)
            .await?
            .map_err(trap)
    }
}
