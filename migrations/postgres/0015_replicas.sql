-- v0.10 replicas: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS leases (
    name       TEXT PRIMARY KEY NOT NULL,
    holder     TEXT NOT NULL,
    token      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS sealed_settings (
    name       TEXT PRIMARY KEY NOT NULL,
    sealed     BYTEA NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS shared_components (
    name       TEXT PRIMARY KEY NOT NULL,
    wasm       BYTEA NOT NULL,
    grant_toml TEXT,
    sha256     TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS adapter_run_allowance (
    adapter    TEXT PRIMARY KEY NOT NULL,
    tokens     DOUBLE PRECISION NOT NULL,
    updated_ms BIGINT NOT NULL
);

ALTER TABLE adapter_jobs ADD COLUMN IF NOT EXISTS lease_holder TEXT;
ALTER TABLE adapter_jobs ADD COLUMN IF NOT EXISTS lease_until BIGINT;
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS runner TEXT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS runner TEXT;
