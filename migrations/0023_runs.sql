-- v0.15: runs started through /api/runs (and chat streams): each is a task (`tasks` holds its
-- status), in a conversation, with the trace it writes named before it starts. Its stream's
-- frames are kept in order (`seq` from 1), so a client re-joins it on any replica.
CREATE TABLE IF NOT EXISTS runs (
    task_id         TEXT PRIMARY KEY NOT NULL REFERENCES tasks (task_id) ON DELETE CASCADE,
    conversation_id TEXT NOT NULL,
    trace_id        TEXT NOT NULL,
    -- The caller's own JSON object, returned as given.
    metadata        TEXT,
    created_at      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_conversation ON runs (conversation_id);
CREATE TABLE IF NOT EXISTS run_events (
    task_id TEXT NOT NULL REFERENCES runs (task_id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    frame   TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);
