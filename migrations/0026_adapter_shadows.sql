-- v0.19: a shadow build beside a serving component (`adapters install --shadow`): how many
-- live calls it was run on, how many it answered the same, how many it missed for want of
-- an instance; counted by every replica that runs it. A new build starts the counts anew.
CREATE TABLE IF NOT EXISTS adapter_shadows (
    adapter  TEXT PRIMARY KEY NOT NULL,
    version  TEXT NOT NULL,
    sha256   TEXT NOT NULL,
    since    TEXT NOT NULL,
    compared INTEGER NOT NULL DEFAULT 0,
    matched  INTEGER NOT NULL DEFAULT 0,
    skipped  INTEGER NOT NULL DEFAULT 0
);
-- Its latest differences (`{export, input, live, shadow, refused}` in `body`, JSON).
CREATE TABLE IF NOT EXISTS adapter_shadow_differences (
    id      TEXT PRIMARY KEY NOT NULL,
    adapter TEXT NOT NULL,
    sha256  TEXT NOT NULL,
    at      TEXT NOT NULL,
    at_ms   INTEGER NOT NULL,
    body    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS adapter_shadow_differences_newest
    ON adapter_shadow_differences (adapter, at_ms, id);
