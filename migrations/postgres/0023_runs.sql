-- v0.15 runs: see the SQLite step of the same number.
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
    seq     BIGINT NOT NULL,
    frame   TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
);
