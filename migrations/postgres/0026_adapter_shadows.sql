-- v0.19 shadow builds' comparisons: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS adapter_shadows (
    adapter  TEXT PRIMARY KEY NOT NULL,
    version  TEXT NOT NULL,
    sha256   TEXT NOT NULL,
    since    TEXT NOT NULL,
    compared BIGINT NOT NULL DEFAULT 0,
    matched  BIGINT NOT NULL DEFAULT 0,
    skipped  BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS adapter_shadow_differences (
    id      TEXT PRIMARY KEY NOT NULL,
    adapter TEXT NOT NULL,
    sha256  TEXT NOT NULL,
    at      TEXT NOT NULL,
    at_ms   BIGINT NOT NULL,
    body    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS adapter_shadow_differences_newest
    ON adapter_shadow_differences (adapter, at_ms, id);
