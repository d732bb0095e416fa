-- v0.5.0 plugin system: per-adapter key-value store. `expires_at` is unix milliseconds.
CREATE TABLE IF NOT EXISTS adapter_kv (
    adapter    TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      BLOB NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (adapter, key)
) WITHOUT ROWID;
