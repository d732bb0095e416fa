-- v0.14: people. Users sign in with a local password (argon2id) or through single sign-on
-- (`subject` is the provider's issuer and subject); a session is a cookie whose SHA-256 is
-- stored here, so every replica knows it and sign-out reaches them all. Who started a
-- conversation (`started_by`) and who may use an agent (`agent_profiles.access`), both added
-- by the migration code.
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

-- One-time links: the first admin's, and a new user's (or a reset) to set a password.
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
