-- v0.14: API tokens, sent as `Authorization: Bearer`. `hash` is the SHA-256 of the secret,
-- which is shown once and never stored; `hint` its first characters.
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
