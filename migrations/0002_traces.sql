-- v0.1.0 foundation: one row per agent run, written when the run starts. `warnings` is a
-- JSON array of notes about the run that did not stop it (e.g. a listed tool that is missing).
CREATE TABLE IF NOT EXISTS traces (
    id                 TEXT PRIMARY KEY NOT NULL,
    parent_trace_id    TEXT REFERENCES traces (id) ON DELETE SET NULL,
    agent_profile_name TEXT,
    source             TEXT NOT NULL DEFAULT 'chat',
    provider           TEXT NOT NULL,
    model              TEXT NOT NULL,
    prompt             TEXT NOT NULL,
    response           TEXT,
    status             TEXT NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'ok', 'error')),
    error_message      TEXT,
    warnings           TEXT,
    latency_ms         INTEGER,
    input_tokens       INTEGER,
    output_tokens      INTEGER,
    created_at         TEXT NOT NULL,
    finished_at        TEXT
);
