-- v0.18 recordings of component calls: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS adapter_recordings (
    id          TEXT PRIMARY KEY NOT NULL,
    adapter     TEXT NOT NULL,
    export      TEXT NOT NULL,
    -- `ok`, `failed` (the component answered a failure) or `error` (the call did not finish).
    outcome     TEXT NOT NULL,
    error_kind  TEXT,
    error       TEXT,
    at          TEXT NOT NULL,
    -- Milliseconds since the epoch: the order, and the age bound.
    at_ms       BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    bytes       BIGINT NOT NULL,
    -- Imports not kept past `limits.recording_kib`.
    cut         INTEGER NOT NULL DEFAULT 0,
    body        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS adapter_recordings_newest ON adapter_recordings (adapter, at_ms, id);
