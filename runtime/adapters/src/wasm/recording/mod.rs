//! Recordings of component calls. A component touches the world only through the host's
//! imports, so a call is kept whole by its export and input, every import it made with its
//! result in order (the contract's, `wasi:http`, clocks and random), and how it ended. The grant
//! says which calls are kept (`record`); the tape is the call's, the store its adapter's.
//!
//! What a recording never holds: the value of a secret the adapter may read. A granted read
//! is noted by name, and every granted secret's value is replaced by `{{secret:NAME}}` wherever
//! else it shows (an answer that echoes one included), so a placeholder the guest wrote and a
//! value it read look the same.

mod refused;
mod replay;
mod values;
mod wasi;
mod writer;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

pub(crate) use refused::Refusable;
pub(crate) use replay::Answer;
use replay::Script;
pub use replay::{Fixture, Mode, Replayed, replay};
use values::Secrets;
pub(crate) use values::written_bytes;
pub(super) use wasi::{RecordedClocks, RecordedRandom};
use writer::Queued;
pub(crate) use writer::Writer;

use super::grants::{Limits, Record};
use super::shadow::Turn;
use super::state::Caller;

/// How a recorded call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    /// The component answered a failure: an HTTP 5xx, a job or a tool that failed, a hook
    /// that refused.
    Failed,
    /// The call did not finish: a trap, a panic, a deadline, memory.
    Error,
}

impl Outcome {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Error => "error",
        }
    }
}

/// One call's recording as it is made. Shared by the store's host functions and its clocks
/// and random generators, which hold no borrow of the store.
#[derive(Clone, Default)]
pub(crate) struct Tape(Arc<Mutex<Reel>>);

#[derive(Default)]
struct Reel {
    /// Off between calls: a clock read while the host prepares an instance is no call's.
    rolling: bool,
    secrets: Secrets,
    /// Each import noted, in order.
    imports: Vec<Entry>,
    bytes: usize,
    most: usize,
    /// Imports not kept past `most`.
    cut: usize,
    /// When replaying: the recording that answers the imports instead of the world.
    script: Option<Script>,
    /// The run of random bytes being drawn, and from which generator.
    drawn: Option<(&'static str, Vec<u8>)>,
}

impl Tape {
    /// Starts recording a call, with the values to hide and the most it may keep (a replay's
    /// script stays).
    fn start(&self, secrets: Secrets, limits: &Limits) {
        let mut reel = self.reel();
        let script = reel.script.take();
        *reel = Reel {
            rolling: true,
            secrets,
            most: limits.recording_kib as usize * 1024,
            script,
            ..Reel::default()
        };
    }

    /// What the replayed recording answers to this import: `None` when none is replayed
    /// (then the import is done for real, and never otherwise).
    pub(crate) fn answer(&self, import: &str, args: &Value) -> Option<Answer> {
        let mut reel = self.reel();
        // Every import asks while recording too: nothing is copied unless a replay runs.
        reel.script.as_ref()?;
        let args = reel.secrets.hidden(args.clone());
        let script = reel.script.as_mut()?;
        Some(match script.answer(import, args) {
            Answer::Recorded(value) => Answer::Recorded(values::unhidden(value)),
            other => other,
        })
    }

    /// Notes one import, its arguments and its result.
    pub(crate) fn note(
        &self,
        import: &'static str,
        args: impl FnOnce() -> Value,
        result: &impl Serialize,
    ) {
        let mut reel = self.reel();
        if !reel.rolling || reel.script.is_some() {
            return;
        }
        // Nothing made for an import that could not fit.
        if !reel.fits(1) {
            return;
        }
        let mut args = args();
        let mut result = serde_json::to_value(result).unwrap_or(Value::Null);
        reel.secrets.hide(&mut args);
        reel.secrets.hide(&mut result);
        // Written as `Entry::write` writes the others, without a map made for it (the import's
        // name is the host's own, so it needs no escaping).
        let text = format!(
            "{{\"import\":\"{import}\",\"args\":{},\"result\":{}}}",
            json_text(&args),
            json_text(&result)
        );
        // One import alone (a 4 MiB answer) must not carry the recording past its bound.
        if !reel.fits(text.len()) {
            return;
        }
        reel.flush_drawn();
        reel.keep(text);
    }

    /// Notes a clock's reading: kept as the number until the recording is written (an
    /// interpreter reads clocks often, and most tapes are never written).
    pub(super) fn note_clock(&self, import: &'static str, reading: u64) {
        let mut reel = self.reel();
        if !reel.rolling || reel.script.is_some() {
            return;
        }
        // At most what it writes: `{"import":"..","args":null,"result":N}`, N of 20 digits.
        let size = import.len() + 55;
        if !reel.fits(size) {
            return;
        }
        reel.flush_drawn();
        reel.bytes += size;
        reel.imports.push(Entry::Clock(import, reading));
    }

    /// Random bytes into `dst`: the replayed recording's, else `fill`'s, noted. A run of draws
    /// (a guest's allocator or interpreter draws a word at a time) is one import, kept as
    /// bytes until another import comes. One lock a draw: interpreters draw thousands.
    pub(super) fn draw(&self, import: &'static str, dst: &mut [u8], fill: impl FnOnce(&mut [u8])) {
        let mut reel = self.reel();
        if let Some(script) = reel.script.as_mut() {
            script.bytes(import, dst);
            return;
        }
        fill(dst);
        if !reel.rolling {
            return;
        }
        if !reel.fits(dst.len() * 2) {
            return;
        }
        reel.bytes += dst.len() * 2;
        match &mut reel.drawn {
            Some((same, drawn)) if *same == import => drawn.extend_from_slice(dst),
            _ => {
                reel.flush_drawn();
                reel.drawn = Some((import, dst.to_vec()));
            }
        }
    }

    /// Stops recording; what was noted (nothing, for a replay: its driver reads the
    /// script).
    fn stop(&self) -> Option<Noted> {
        let mut reel = self.reel();
        if reel.script.is_some() {
            reel.rolling = false;
            return None;
        }
        reel.flush_drawn();
        let reel = std::mem::take(&mut *reel);
        Some(Noted {
            secrets: reel.secrets,
            imports: reel.imports,
            bytes: reel.bytes,
            cut: reel.cut,
            most: reel.most,
        })
    }

    fn reel(&self) -> std::sync::MutexGuard<'_, Reel> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Reel {
    /// Whether an import of `size` bytes fits; once one is cut, the rest are (a recording has
    /// no holes), each counted in `cut`.
    fn fits(&mut self, size: usize) -> bool {
        if self.cut > 0 || self.bytes + size > self.most {
            self.cut += 1;
            return false;
        }
        true
    }

    /// Counted already: the bytes of random runs are counted as they are drawn.
    fn flush_drawn(&mut self) {
        if let Some((import, drawn)) = self.drawn.take() {
            self.imports.push(Entry::Drawn(import, drawn));
        }
    }

    fn keep(&mut self, text: String) {
        self.bytes += text.len();
        self.imports.push(Entry::Noted(text));
    }
}

/// One import on a tape. Clock readings and random bytes stay as they came until the
/// recording is written or replayed: most tapes (`record = "errors"`, a call that went well)
/// are dropped unread.
#[derive(Clone)]
enum Entry {
    /// `{import, args, result}` as JSON text, secrets hidden.
    Noted(String),
    /// A clock's reading: `{import, args: null, result}`.
    Clock(&'static str, u64),
    /// A run of random bytes: `{import, bytes}`, the bytes in hex.
    Drawn(&'static str, Vec<u8>),
}

impl Entry {
    fn write(&self, out: &mut String) {
        use std::fmt::Write as _;
        match self {
            Self::Noted(text) => out.push_str(text),
            Self::Clock(import, reading) => {
                let _ = write!(
                    out,
                    "{{\"import\":\"{import}\",\"args\":null,\"result\":{reading}}}"
                );
            }
            Self::Drawn(import, bytes) => {
                let _ = write!(
                    out,
                    "{{\"import\":\"{import}\",\"bytes\":\"{}\"}}",
                    hex(bytes)
                );
            }
        }
    }

    fn value(&self) -> Option<Value> {
        match self {
            Self::Noted(text) => serde_json::from_str(text).ok(),
            Self::Clock(import, reading) => {
                Some(json!({"import": import, "args": null, "result": reading}))
            }
            Self::Drawn(import, bytes) => Some(json!({"import": import, "bytes": hex(bytes)})),
        }
    }
}

/// A value as JSON text, written straight into its buffer (`Value`'s `Display` goes through
/// the formatter a piece at a time).
fn json_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Bytes in hex, through a table (`hex::encode` goes a char at a time).
fn hex(bytes: &[u8]) -> String {
    let mut text = vec![0; bytes.len() * 2];
    hex::encode_to_slice(bytes, &mut text).expect("twice as long as the bytes");
    String::from_utf8(text).expect("hex is ASCII")
}

/// What a call's tape holds once it stopped.
#[derive(Clone)]
struct Noted {
    secrets: Secrets,
    imports: Vec<Entry>,
    bytes: usize,
    cut: usize,
    most: usize,
}

/// A finished recording, ready to store.
struct Finished {
    export: &'static str,
    outcome: Outcome,
    /// The failure's kind and message, when the call did not finish.
    error: Option<(String, String)>,
    duration_ms: u64,
    cut: usize,
    /// `{input, imports, output}` as JSON text.
    body: String,
}

impl Noted {
    /// The call as a replay takes it, whole (a shadow's input is never cut).
    fn fixture(
        self,
        adapter: String,
        export: &'static str,
        input: Value,
        output: Value,
        outcome: Outcome,
    ) -> Fixture {
        Fixture {
            adapter,
            export: export.to_owned(),
            outcome: outcome.as_str().to_owned(),
            input: self.secrets.hidden(input),
            imports: self.imports.iter().filter_map(Entry::value).collect(),
            output: self.secrets.hidden(output),
        }
    }

    /// The call to `export` with this `input`, `output` (null when it did not finish) and
    /// `error`.
    fn end(
        self,
        export: &'static str,
        input: Value,
        output: Value,
        outcome: Outcome,
        error: Option<(String, String)>,
        duration_ms: u64,
    ) -> Ended {
        // The input and output count against the bound too: past it they are summarised.
        let mut room = self.most.saturating_sub(self.bytes);
        let mut kept = |value: Value| {
            let text = json_text(&self.secrets.hidden(value));
            if text.len() <= room {
                room -= text.len();
                text
            } else {
                json!({"cut": format!("{} bytes, past limits.recording_kib", text.len())})
                    .to_string()
            }
        };
        let (input, output) = (kept(input), kept(output));
        Ended {
            export,
            error: error.map(|(kind, message)| (kind, self.secrets.hide_text(&message))),
            imports: self.imports,
            bytes: self.bytes,
            cut: self.cut,
            input,
            output,
            outcome,
            duration_ms,
        }
    }
}

/// A recorded call as it ended. Its input and output are written (their secrets hidden) on
/// the call's thread: left to the writer, their many small values were freed on another thread,
/// and the trivial Rust route's calls were slower for it (1.16x under `all`, against 1.11x).
/// The rest (random runs in hex, the whole text) is made by the adapter's writer, after the
/// answer, and never for a recording dropped before it is written.
struct Ended {
    export: &'static str,
    imports: Vec<Entry>,
    bytes: usize,
    cut: usize,
    input: String,
    output: String,
    outcome: Outcome,
    error: Option<(String, String)>,
    duration_ms: u64,
}

impl Ended {
    fn finish(self) -> Finished {
        let mut body =
            String::with_capacity(self.bytes + self.input.len() + self.output.len() + 64);
        body.push_str("{\"input\":");
        body.push_str(&self.input);
        body.push_str(",\"imports\":[");
        for (i, entry) in self.imports.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            entry.write(&mut body);
        }
        body.push_str("],\"output\":");
        body.push_str(&self.output);
        body.push('}');
        Finished {
            export: self.export,
            outcome: self.outcome,
            error: self.error,
            duration_ms: self.duration_ms,
            cut: self.cut,
            body,
        }
    }
}

/// One call being recorded: started before the instance runs, done once the call ended.
pub(crate) struct Recorder {
    tape: Tape,
    export: &'static str,
    input: Value,
    started: Instant,
    started_ms: i64,
    caller: Arc<Caller>,
    /// The shadow build's turn on this call, when it took it.
    shadow: Option<Turn>,
}

impl Recorder {
    /// Starts recording a call to `export` on the store's `tape`, when its adapter records
    /// calls or its shadow build takes this one; `input` (a copy of the request) is made only
    /// then.
    pub(crate) fn start(
        caller: &Arc<Caller>,
        tape: Tape,
        export: &'static str,
        input: impl FnOnce() -> Option<Value>,
    ) -> Option<Self> {
        let shadow = caller.shadowed();
        if caller.granted.record == Record::Off && shadow.is_none() {
            return None;
        }
        let input = input()?;
        tape.start(secrets_of(caller), &caller.granted.limits);
        Some(Self {
            tape,
            export,
            input,
            shadow,
            started: Instant::now(),
            started_ms: crate::db::now_ms(),
            caller: Arc::clone(caller),
        })
    }

    /// The call ended: keeps its recording when the adapter's `record` says so (its writer
    /// writes it), and hands it to the adapter's shadow build when the call is in its sample.
    /// The write and the shadow happen after the answer, never before it.
    pub(crate) fn done(
        self,
        output: impl FnOnce() -> Value,
        outcome: Outcome,
        error: Option<(String, String)>,
    ) {
        let Some(noted) = self.tape.stop() else {
            return;
        };
        let keep = kept(self.caller.granted.record, outcome);
        let shadow = self.shadow;
        if !keep && shadow.is_none() {
            return;
        }
        let output = output();
        if let Some(shadow) = shadow {
            let (adapter, export) = (self.caller.adapter.clone(), self.export);
            let compare = move |noted: Noted, input, output| {
                shadow.compare(move || noted.fixture(adapter, export, input, output, outcome));
            };
            if !keep {
                return compare(noted, self.input, output);
            }
            compare(noted.clone(), self.input.clone(), output.clone());
        }
        let duration_ms = self.started.elapsed().as_millis() as u64;
        let ended = noted.end(self.export, self.input, output, outcome, error, duration_ms);
        let queued = Queued {
            ended,
            started_ms: self.started_ms,
        };
        self.caller.recordings.send(&self.caller, queued);
    }
}

/// Whether a call that ended `outcome` is kept under `record`.
fn kept(record: Record, outcome: Outcome) -> bool {
    match record {
        Record::Off => false,
        Record::Errors => outcome != Outcome::Ok,
        Record::All => true,
    }
}

/// The secrets `caller` may read, with their values now, to hide from its recordings.
fn secrets_of(caller: &Caller) -> Secrets {
    Secrets::new(
        caller
            .granted
            .secrets
            .names
            .iter()
            .filter_map(|name| Some((name.clone(), caller.services.env.get(name)?))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_written_as_a_replay_reads_it_and_a_reading_within_its_count() {
        let noted = r#"{"import":"kv.get","args":{"key":"k"},"result":null}"#;
        for entry in [
            Entry::Noted(noted.to_owned()),
            Entry::Clock("monotonic-clock.now", u64::MAX),
            Entry::Drawn("random", vec![0x00, 0xab, 0xff]),
        ] {
            let mut written = String::new();
            entry.write(&mut written);
            let read: Value = serde_json::from_str(&written).unwrap();
            assert_eq!(Some(read), entry.value(), "{written}");
            if let Entry::Clock(import, _) = entry {
                // What `note_clock` counts against the bound, at the largest reading.
                assert_eq!(written.len(), import.len() + 55);
            }
        }
        assert_eq!(hex(&[0x00, 0xab, 0xff]), "00abff");
    }
}
