//! Replaying a recording: the same component, or a new build of it, runs the recorded call
//! offline, each import answered from the recording in order. Nothing it asks for is done.
//! A replay ends the call at the first import the recording did not make, and reports it as
//! where the two diverged; a shadow (`shadow`) is refused that import and goes on.

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

/// What a call replayed gets for an import the recording did not make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The call ends there: `adapters replay` reports where it diverged.
    Replay,
    /// It is refused and the call goes on: a shadow build. Each import is answered by the
    /// first recorded one from where the call is with the same name and arguments (a build
    /// that makes fewer imports still lines up); clocks and random bytes only by the next.
    Shadow,
}

/// What the recording answers to one import.
pub(crate) enum Answer {
    Recorded(Value),
    /// Not in the recording: nothing is done, and the guest is told so.
    Refused(String),
    /// Not in the recording, and the call ends.
    Ended(String),
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
    /// A shadow's imports the recording did not make (refused): `{import, args}`.
    pub refused: Vec<Value>,
}

impl Replayed {
    /// Whether the replay did what the recording did: the same imports, output and outcome.
    pub fn matches(&self, fixture: &Fixture) -> bool {
        self.diverged.is_none() && self.output == fixture.output && self.outcome == fixture.outcome
    }
}

/// The recording's imports, answered in order.
pub(super) struct Script {
    mode: Mode,
    entries: Vec<Value>,
    next: usize,
    /// The current entry's random bytes (decoded once), and how many were given.
    drawn: Option<Vec<u8>>,
    taken: usize,
    diverged: Option<Value>,
    refused: Vec<Value>,
}

/// The WASI imports a shadow gets only from the next entry: read anywhere, often.
fn ambient(import: &str) -> bool {
    import.ends_with("clock.now")
}

impl Script {
    fn new(mode: Mode, entries: Vec<Value>) -> Self {
        Self {
            mode,
            entries,
            next: 0,
            drawn: None,
            taken: 0,
            diverged: None,
            refused: Vec::new(),
        }
    }

    /// The recorded result of this import with these arguments: the next entry's (a
    /// shadow's: the first such from the next on).
    pub(super) fn answer(&mut self, import: &str, args: Value) -> Answer {
        if let Some(diverged) = &self.diverged {
            return Answer::Ended(format!(
                "the replay diverged from the recording: {diverged}"
            ));
        }
        let same = |entry: &Value| entry["import"] == import && entry["args"] == args;
        let found = match self.mode {
            Mode::Shadow if !ambient(import) => self.entries[self.next.min(self.entries.len())..]
                .iter()
                .position(same)
                .map(|skipped| self.next + skipped),
            _ => self
                .entries
                .get(self.next)
                .filter(|e| same(e))
                .map(|_| self.next),
        };
        match (found, self.mode) {
            (Some(at), _) => {
                self.next = at + 1;
                self.drawn = None;
                Answer::Recorded(self.entries[at]["result"].clone())
            }
            (None, Mode::Shadow) => {
                let why = format!("the live call did not make this {import}: refused");
                if !ambient(import) {
                    self.refused.push(json!({"import": import, "args": args}));
                }
                Answer::Refused(why)
            }
            (None, Mode::Replay) => {
                let got = json!({"import": import, "args": args});
                Answer::Ended(self.diverge(got))
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
            // A shadow's draws past the recording's are zeros, and nothing more.
            None if self.mode == Mode::Shadow => {}
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
    /// there too (a shadow's never diverges: what it did differently is what it was refused).
    fn divergence(&self) -> Option<Value> {
        if self.mode == Mode::Shadow {
            return None;
        }
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
/// new build, whose grant records: the tape is what answers), in an instance place as `wait`
/// says.
pub async fn replay(
    sandbox: &Sandbox,
    prepared: &Arc<Prepared>,
    fixture: &Fixture,
    mode: Mode,
    wait: Wait,
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
    let script = Script::new(mode, fixture.imports.clone());
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
            run(sandbox, prepared, call, script, limits.handle_http(), wait).await
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
            run(sandbox, prepared, call, script, limits.run_job(), wait).await
        }
        "call-tool" => {
            let call = CallTool {
                name: text("name"),
                args_json: text("args_json"),
                run: None,
            };
            run(sandbox, prepared, call, script, limits.run_job(), wait).await
        }
        "start" | "stop" => {
            let call = Hook(fixture.export == "start");
            run(sandbox, prepared, call, script, limits.handle_http(), wait).await
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
    wait: Wait,
) -> anyhow::Result<Replayed> {
    let tape = Arc::new(Mutex::new(None));
    let replaying = Replaying {
        call,
        script: Mutex::new(Some(script)),
        tape: Arc::clone(&tape),
    };
    let answered = sandbox.call(prepared, replaying, limit, wait).await;
    let tape = tape.lock().unwrap_or_else(PoisonError::into_inner).take();
    let (diverged, refused) = tape
        .and_then(|tape| {
            let reel = tape.reel();
            let script = reel.script.as_ref()?;
            Some((script.divergence(), script.refused.clone()))
        })
        .unwrap_or_default();
    // Written as recordings write values (bytes as text).
    let written = |value: Value| Secrets::default().hidden(value);
    Ok(match answered {
        Ok(output) => Replayed {
            output: written(C::written(&output)),
            outcome: if C::failed(&output) { "failed" } else { "ok" },
            error: None,
            diverged,
            refused,
        },
        Err(e) => Replayed {
            output: Value::Null,
            outcome: "error",
            error: Some(match e {
                CallError::Failed(e) => format!("{}: {}", e.kind.as_str(), e.message),
                CallError::Busy(message) => message,
            }),
            diverged,
            refused,
        },
    })
}
