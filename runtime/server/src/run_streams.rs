//! The streams of runs that outlive their client. A run's frames are numbered from 1; while it
//! runs they are held here (readers on this replica follow them at once) and written to the
//! database every [`FLUSH_EVERY`] (readers on any replica follow them from there, and everyone
//! once it ended). So a client that lost its stream re-joins it anywhere, from the frame after
//! the last it saw, and gets each frame once.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::Stream;
use futures_util::stream;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::config::RunsSection;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::runs as store;

/// How often a running run's new frames go to the database.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// How often a reader on another replica than the run's looks for new frames.
const POLL_EVERY: Duration = Duration::from_millis(200);
/// Frames read from the database at once.
const PAGE: u32 = 500;

/// The last frame of a run's stream is one of these.
const LAST_TYPES: [&str; 3] = ["done", "error", "approval_required"];

/// Whether `frame` (JSON text) ends its stream.
fn is_last(frame: &str) -> bool {
    serde_json::from_str::<Value>(frame).is_ok_and(|value| {
        value["type"]
            .as_str()
            .is_some_and(|kind| LAST_TYPES.contains(&kind))
    })
}

/// The runs running on this replica, by id.
pub struct RunStreams {
    live: Mutex<HashMap<String, Arc<Live>>>,
    limits: RunsSection,
}

/// A running run's frames so far.
struct Live {
    frames: Mutex<Frames>,
    /// How many frames there are, for readers to wait on.
    count: watch::Sender<usize>,
}

impl Live {
    fn frames(&self) -> std::sync::MutexGuard<'_, Frames> {
        self.frames.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Default)]
struct Frames {
    all: Vec<Arc<str>>,
    bytes: usize,
    truncated: bool,
    /// All are in the database and no more come here: readers go on from there.
    handed_over: bool,
}

impl RunStreams {
    pub fn new(limits: RunsSection) -> Self {
        Self {
            live: Mutex::default(),
            limits,
        }
    }

    /// Starts holding `run_id`'s frames; the returned recorder adds them.
    pub fn begin(self: &Arc<Self>, run_id: &str) -> Recorder {
        let live = Arc::new(Live {
            frames: Mutex::default(),
            count: watch::Sender::new(0),
        });
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(run_id.to_owned(), Arc::clone(&live));
        Recorder {
            runs: Arc::clone(self),
            run_id: run_id.to_owned(),
            live,
            flushed: 0,
        }
    }

    fn live(&self, run_id: &str) -> Option<Arc<Live>> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .cloned()
    }

    /// The number of `run_id`'s last frame so far.
    pub async fn last_frame(&self, db: &Db, run_id: &str) -> Result<i64> {
        if let Some(live) = self.live(run_id) {
            return Ok(*live.count.borrow() as i64);
        }
        let id = run_id.to_owned();
        db.call(move |conn| store::last_event(conn, &id)).await
    }

    /// `run_id`'s frames after `after`, with their numbers, until its last frame: from here
    /// while it runs here, else from the database.
    pub fn follow(
        self: &Arc<Self>,
        db: Db,
        run_id: String,
        after: i64,
    ) -> impl Stream<Item = (i64, Arc<str>)> + Send + 'static {
        let reader = Reader {
            runs: Arc::clone(self),
            db,
            run_id,
            after,
            ready: VecDeque::new(),
            ended: false,
        };
        stream::unfold(reader, |mut reader| async move {
            let next = reader.next().await?;
            Some((next, reader))
        })
    }
}

struct Reader {
    runs: Arc<RunStreams>,
    db: Db,
    run_id: String,
    after: i64,
    ready: VecDeque<(i64, Arc<str>)>,
    ended: bool,
}

impl Reader {
    async fn next(&mut self) -> Option<(i64, Arc<str>)> {
        loop {
            if let Some((seq, frame)) = self.ready.pop_front() {
                self.after = seq;
                self.ended = is_last(&frame);
                return Some((seq, frame));
            }
            if self.ended {
                return None;
            }
            match self.runs.live(&self.run_id) {
                Some(live) => self.take_held(&live).await,
                None => match self.take_stored().await {
                    Ok(true) => {}
                    Ok(false) => tokio::time::sleep(POLL_EVERY).await,
                    Err(e) => {
                        tracing::warn!(run = %self.run_id, "cannot read a run's frames: {e}");
                        tokio::time::sleep(POLL_EVERY).await;
                    }
                },
            }
        }
    }

    /// Takes the frames after `after` held here, waiting for one when there are none yet.
    /// Returns when there are some, or when the run stopped being held here (its frames are
    /// then all in the database).
    async fn take_held(&mut self, live: &Live) {
        let mut count = live.count.subscribe();
        loop {
            count.borrow_and_update();
            {
                let frames = live.frames();
                let from = usize::try_from(self.after).unwrap_or(0);
                if frames.all.len() > from {
                    let fresh = frames.all[from..].iter().cloned();
                    self.ready.extend((self.after + 1..).zip(fresh));
                    return;
                }
                if frames.handed_over {
                    return;
                }
            }
            if count.changed().await.is_err() {
                return;
            }
        }
    }

    /// Reads the next page from the database; false when there was nothing new. A run that
    /// ended without its last frame (its replica stopped) gets one saying so.
    async fn take_stored(&mut self) -> Result<bool> {
        let (id, after) = (self.run_id.clone(), self.after);
        let (page, run) = self
            .db
            .call(move |conn| {
                let page = store::events_after(conn, &id, after, PAGE)?;
                let run = if page.is_empty() {
                    store::get(conn, &id)?
                } else {
                    None
                };
                Ok((page, run))
            })
            .await?;
        if !page.is_empty() {
            self.ready
                .extend(page.into_iter().map(|(seq, frame)| (seq, Arc::from(frame))));
            return Ok(true);
        }
        let Some(run) = run else {
            return Err(Error::not_found(format!("no run {:?}", self.run_id)));
        };
        if matches!(run.status, "running" | "pending") {
            return Ok(false);
        }
        // Ended, and nothing after `after`: its replica stopped before writing its last frame,
        // or its frames are past `[runs] events_kept_hours`. The frame that says so is made
        // from the run alone, so every reader gets the same one, and a read writes nothing.
        let message = match run.status {
            "error" => run
                .description
                .unwrap_or_else(|| "the run was interrupted".into()),
            status => format!(
                "the frames of this run are no longer kept; it ended {status}, see GET \
                 /api/runs/{}",
                run.run_id
            ),
        };
        let last = json!({
            "type": "error",
            "message": message,
            "trace_id": run.trace_id,
            "conversation_id": run.conversation_id,
        });
        self.ready
            .push_back((after + 1, Arc::from(last.to_string())));
        Ok(true)
    }
}

/// Adds a running run's frames, numbered, within `[runs]`'s bounds, and writes them to the
/// database.
pub struct Recorder {
    runs: Arc<RunStreams>,
    run_id: String,
    live: Arc<Live>,
    /// Frames already in the database.
    flushed: usize,
}

impl Recorder {
    /// Adds a frame; past the bounds it is left out (one frame says so), keeping a place for
    /// the last (see [`Recorder::end`]).
    pub fn push(&mut self, frame: &Value) {
        let text: Arc<str> = Arc::from(frame.to_string());
        let limits = &self.runs.limits;
        let count = {
            let mut frames = self.live.frames();
            // Two places stay free: the frame that says the stream was cut, and the last.
            let over = frames.all.len() + 3 > limits.max_events()
                || frames.bytes + text.len() > limits.max_event_bytes();
            if over {
                if !frames.truncated {
                    frames.truncated = true;
                    let note = json!({
                        "type": "truncated",
                        "message": format!(
                            "this run's stream is over its bounds ([runs] max_events {}, \
                             max_event_bytes {}); its answer is in GET /api/runs/{}",
                            limits.max_events(),
                            limits.max_event_bytes(),
                            self.run_id
                        ),
                    });
                    frames.all.push(Arc::from(note.to_string()));
                }
            } else {
                frames.bytes += text.len();
                frames.all.push(text);
            }
            frames.all.len()
        };
        self.live.count.send_replace(count);
    }

    /// The frames not yet in the database.
    fn fresh(&self) -> Vec<String> {
        let frames = self.live.frames();
        frames.all[self.flushed..]
            .iter()
            .map(|frame| frame.to_string())
            .collect()
    }

    /// Writes the frames added since the last flush.
    pub async fn flush(&mut self, db: &Db) -> Result<()> {
        let fresh = self.fresh();
        if fresh.is_empty() {
            return Ok(());
        }
        let (id, first, count) = (self.run_id.clone(), self.flushed as i64 + 1, fresh.len());
        db.call(move |conn| store::append_events(conn, &id, first, &fresh))
            .await?;
        self.flushed += count;
        Ok(())
    }

    /// Writes what is left and the last frame with how the run ended (see [`store::finish`]),
    /// then shows the last frame to readers here and stops holding the frames: readers go on
    /// from the database. So whoever sees a run's last frame, here or elsewhere, finds its end
    /// recorded. A write that fails is tried again for a while, so the end lands.
    pub async fn end(self, db: &Db, last: &Value, finish: store::Finish) {
        let last: Arc<str> = Arc::from(last.to_string());
        let mut fresh = self.fresh();
        fresh.push(last.to_string());
        let first = self.flushed as i64 + 1;
        for tries in 1.. {
            let (id, finish, fresh) = (self.run_id.clone(), finish.clone(), fresh.clone());
            let written = db
                .call(move |conn| store::finish(conn, &id, &finish, first, &fresh))
                .await;
            match written {
                Ok(()) => break,
                Err(e) if tries == 30 => {
                    tracing::error!(run = %self.run_id, "cannot record a run's end: {e}");
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
        self.runs
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.run_id);
        let count = {
            let mut frames = self.live.frames();
            frames.all.push(last);
            frames.handed_over = true;
            frames.all.len()
        };
        // Wakes the readers here: they take the last frame, or go on from the database.
        self.live.count.send_replace(count);
    }
}
