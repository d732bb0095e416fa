-- v0.12 adapter activity: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS adapter_activity (
    name             TEXT PRIMARY KEY NOT NULL,
    last_activity_at TEXT NOT NULL
);
