-- v0.8.0 local-first: outcome of the last live probe of each integration.
CREATE TABLE IF NOT EXISTS integration_verifications (
    integration TEXT PRIMARY KEY NOT NULL,
    ok          INTEGER NOT NULL CHECK (ok IN (0, 1)),
    error       TEXT,
    verified_at TEXT NOT NULL
);
