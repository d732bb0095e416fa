-- v0.14 people: see the SQLite step of the same number.
CREATE TABLE IF NOT EXISTS users (
    name            TEXT PRIMARY KEY NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'member', 'viewer')),
    source          TEXT NOT NULL CHECK (source IN ('local', 'oidc')),
    subject         TEXT UNIQUE,
    groups          TEXT NOT NULL DEFAULT '[]',
    password_hash   TEXT,
    created_at      TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    last_sign_in_at TEXT
);

CREATE TABLE IF NOT EXISTS sessions (
    hash       TEXT PRIMARY KEY NOT NULL,
    user_name  TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    seen_at    TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_user ON sessions (user_name);

-- One-time links.
CREATE TABLE IF NOT EXISTS sign_in_links (
    hash       TEXT PRIMARY KEY NOT NULL,
    purpose    TEXT NOT NULL CHECK (purpose IN ('first_admin', 'password')),
    user_name  TEXT REFERENCES users (name) ON DELETE CASCADE,
    expires_at TEXT NOT NULL
);

-- Single sign-on in progress: the SHA-256 of its `state`, the nonce and PKCE verifier the
-- callback checks, where the person goes next; ten minutes, taken once.
CREATE TABLE IF NOT EXISTS sign_in_flows (
    hash       TEXT PRIMARY KEY NOT NULL,
    nonce      TEXT NOT NULL,
    verifier   TEXT NOT NULL,
    next       TEXT NOT NULL,
    expires_at TEXT NOT NULL
);

ALTER TABLE conversations ADD COLUMN IF NOT EXISTS started_by TEXT;
CREATE INDEX IF NOT EXISTS conversations_started_by ON conversations (started_by);
ALTER TABLE agent_profiles ADD COLUMN IF NOT EXISTS access TEXT;
ALTER TABLE tasks ADD COLUMN IF NOT EXISTS started_by TEXT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS started_by TEXT;
