-- v0.14 API tokens: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS access_tokens (
    name         TEXT PRIMARY KEY NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'member', 'viewer')),
    hint         TEXT NOT NULL,
    hash         TEXT NOT NULL UNIQUE,
    created_at   TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    expires_at   TEXT,
    last_used_at TEXT
);
