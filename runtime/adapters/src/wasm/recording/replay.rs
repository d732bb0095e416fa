//! Replaying a recording: the same component, or a new build of it, runs the recorded call
//! offline, each import answered from the recording in order. Nothing it asks for is done:
//! an import the recording did not make ends the call there, and is reported as where the
//! two first diverged.

use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use service_contract::HttpRequest;

use super::Tape;
use super::values::{Secrets, unhidden};
use crate::adapters::CallError;
use crate::wasm::exports::{Call, CallTool, Exports, HandleHttp, Hook, RunJob};
use crate::wasm::sandbox::{Prepared, Sandbox, Wait};
use crate::wasm::state::{HostState, JobContext};

/// A recording as `adapters replay --save` writes it: everything a replay needs, nothing
/// else (secrets were never in it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fixture {
    pub adapter: String,
    pub export: String,
    pub outcome: String,
    pub input: Value,
    pub imports: Vec<Value>,
    pub output: Value,
}

/// How a replay went.
#[derive(Debug)]
pub struct Replayed {
    pub output: Value,
    /// `ok`, `failed` or `error`, as recordings say.
    pub outcome: &'static str,
    /// Why the call did not finish, when it did not.
    pub error: Option<String>,
    /// The first import that differs from the recording: `{at, expected, got}`.
    pub diverged: Option<Value>,
}

impl Replayed {
    /// Whether the replay did what the recording did: the same imports, output and outcome.
    pub fn matches(&self, fixture: &Fixture) -> bool {
        self.diverged.is_none() && self.output == fixture.output && self.outcome == fixture.outcome
    }
}

/// The recording's imports, answered in order.
pub(super) struct Script {
    entries: Vec<Value>,
    next: usize,
    /// The current entry's random bytes (decoded once), and how many were given.
    drawn: Option<Vec<u8>>,
    taken: usize,
    diverged: Option<Value>,
}

impl Script {
    fn new(entries: Vec<Value>) -> Self {
        Self {
            entries,
            next: 0,
            drawn: None,
            taken: 0,
            diverged: None,
        }
    }

    /// The recorded result of the next import, when it is this one with these arguments.
    pub(super) fn answer(&mut self, import: &str, args: Value) -> Result<Value, String> {
        if let Some(diverged) = &self.diverged {
            return Err(format!(
                "the replay diverged from the recording: {diverged}"
            ));
        }
        let expected = self.entries.get(self.next);
        match expected {
            Some(entry) if entry["import"] == import && entry["args"] == args => {
                self.next += 1;
                Ok(entry["result"].clone())
            }
            _ => {
                let got = json!({"import": import, "args": args});
                Err(self.diverge(got))
            }
        }
    }

    /// Fills `dst` with the recording's next random bytes of `import` (zeros past a
    /// divergence).
    pub(super) fn bytes(&mut self, import: &str, dst: &mut [u8]) {
        dst.fill(0);
        if self.diverged.is_some() {
            return;
        }
        if self.drawn.is_none() {
            self.drawn = self
                .entries
                .get(self.next)
                .filter(|entry| entry["import"] == import)
                .and_then(|entry| hex::decode(entry["bytes"].as_str()?).ok());
            self.taken = 0;
        }
        let end = self.taken + dst.len();
        match self.drawn.as_deref().filter(|drawn| drawn.len() >= end) {
            Some(drawn) => {
                dst.copy_from_slice(&drawn[self.taken..end]);
                self.taken = end;
                if end == drawn.len() {
                    self.next += 1;
                    self.drawn = None;
                }
            }
            None => {
                let got = json!({"import": import, "bytes": dst.len()});
                self.diverge(got);
            }
        }
    }

    fn diverge(&mut self, got: Value) -> String {
        let expected = self.entries.get(self.next).map_or(Value::Null, |entry| {
            json!({"import": entry["import"], "args": entry.get("args").unwrap_or(&Value::Null)})
        });
        let diverged = json!({"at": self.next, "expected": expected, "got": got});
        let why = format!("the replay diverged from the recording: {diverged}");
        self.diverged = Some(diverged);
        why
    }

    /// Where it diverged, if it did; a call that ended before the recording's did diverged
    /// there too.
    fn divergence(&self) -> Option<Value> {
        self.diverged.clone().or_else(|| {
            let left = self.entries.get(self.next)?;
            Some(json!({
                "at": self.next,
                "expected": {"import": left["import"], "args": left.get("args").unwrap_or(&Value::Null)},
                "got": "the call ended",
            }))
        })
    }
}

/// A call replayed: its store's tape gets the script before the instance exists.
struct Replaying<C> {
    call: C,
    script: Mutex<Option<Script>>,
    /// The store's tape, for the driver to read the script back.
    tape: Arc<Mutex<Option<Tape>>>,
}

impl<C: Call> Call for Replaying<C> {
    type Output = C::Output;

    fn export(&self) -> &'static str {
        self.call.export()
    }

    fn prepare(&self, state: &mut HostState) {
        self.call.prepare(state);
        let script = self
            .script
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let (Some(tape), Some(script)) = (&state.tape, script) {
            tape.reel().script = Some(script);
            *self.tape.lock().unwrap_or_else(PoisonError::into_inner) = Some(tape.clone());
        }
    }

    fn recorded(&self, exports: &Exports) -> Option<Value> {
        self.call.recorded(exports)
    }

    fn failed(output: &Self::Output) -> bool {
        C::failed(output)
    }

    fn written(output: &Self::Output) -> Value {
        C::written(output)
    }

    fn call<'a>(
        self,
        store: &'a mut wasmtime::Store<HostState>,
        instance: &'a wasmtime::component::Instance,
        exports: &'a Exports,
    ) -> impl Future<Output = wasmtime::Result<Self::Output>> + Send + 'a {
        self.call.call(store, instance, exports)
    }
}

/// Replays `fixture` with `prepared` (a generation of the recorded adapter's component, or a
/// new build, whose grant records: the tape is what answers).
pub async fn replay(
    sandbox: &Sandbox,
    prepared: &Arc<Prepared>,
    fixture: &Fixture,
) -> anyhow::Result<Replayed> {
    anyhow::ensure!(
        prepared.caller.granted.record != crate::wasm::grants::Record::Off,
        "a replay needs a generation whose calls are taped"
    );
    let input = unhidden(fixture.input.clone());
    let limits = prepared.caller.granted.limits;
    let field = |name: &str| input.get(name).cloned().unwrap_or_default();
    let text = |name: &str| field(name).as_str().unwrap_or_default().to_owned();
    let bytes = |name: &str| serde_json::from_value::<Vec<u8>>(field(name)).unwrap_or_default();
    let script = Script::new(fixture.imports.clone());
    match fixture.export.as_str() {
        "handle-http" => {
            let request = HttpRequest {
                method: text("method"),
                path: text("path"),
                query: text("query"),
                headers: serde_json::from_value(field("headers")).unwrap_or_default(),
                body: bytes("body"),
            };
            let call = HandleHttp(request);
            run(sandbox, prepared, call, script, limits.handle_http()).await
        }
        "run-job" => {
            let job = JobContext {
                task_id: text("id"),
                attempt: field("attempt").as_u64().unwrap_or(1) as u32,
            };
            let call = RunJob {
                job,
                payload: bytes("payload"),
            };
            run(sandbox, prepared, call, script, limits.run_job()).await
        }
        "call-tool" => {
            let call = CallTool {
                name: text("name"),
                args_json: text("args_json"),
                run: None,
            };
            run(sandbox, prepared, call, script, limits.run_job()).await
        }
        "start" | "stop" => {
            let call = Hook(fixture.export == "start");
            run(sandbox, prepared, call, script, limits.handle_http()).await
        }
        other => anyhow::bail!("a recording of {other:?} cannot be replayed"),
    }
}

async fn run<C: Call>(
    sandbox: &Sandbox,
    prepared: &Arc<Prepared>,
    call: C,
    script: Script,
    limit: std::time::Duration,
) -> anyhow::Result<Replayed> {
    let tape = Arc::new(Mutex::new(None));
    let replaying = Replaying {
        call,
        script: Mutex::new(Some(script)),
        tape: Arc::clone(&tape),
    };
    let answered = sandbox.call(prepared, replaying, limit, Wait::Yes).await;
    let tape = tape.lock().unwrap_or_else(PoisonError::into_inner).take();
    let diverged = tape.and_then(|tape| tape.reel().script.as_ref()?.divergence());
    // Written as recordings write values (bytes as text).
    let written = |value: Value| Secrets::default().hidden(value);
    Ok(match answered {
        Ok(output) => Replayed {
            output: written(C::written(&output)),
            outcome: if C::failed(&output) { "failed" } else { "ok" },
            error: None,
            diverged,
        },
        Err(e) => Replayed {
            output: Value::Null,
            outcome: "error",
            error: Some(match e {
                CallError::Failed(e) => format!("{}: {}", e.kind.as_str(), e.message),
                CallError::Busy(message) => message,
            }),
            diverged,
        },
    })
}
