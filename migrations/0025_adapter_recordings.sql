-- v0.18: recordings of component calls (`record` in an adapter's grant): the export and its
-- input, every import the call made with its result, and how it ended (`body`, JSON). Each
-- adapter keeps its newest `limits.recordings_kept`, none older than `limits.recordings_hours`.
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
    at_ms       INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    bytes       INTEGER NOT NULL,
    -- Imports not kept past `limits.recording_kib`.
    cut         INTEGER NOT NULL DEFAULT 0,
    body        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS adapter_recordings_newest ON adapter_recordings (adapter, at_ms, id);
