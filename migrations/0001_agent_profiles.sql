-- v0.1.0 foundation: agent profiles. `tools` is a JSON array; NULL means "not set"
-- (the profile inherits every ungated tool), which differs from an empty list.
CREATE TABLE IF NOT EXISTS agent_profiles (
    name          TEXT PRIMARY KEY NOT NULL CHECK (length(name) > 0),
    system_prompt TEXT NOT NULL,
    description   TEXT NOT NULL DEFAULT '',
    color         TEXT,
    default_model TEXT,
    tools         TEXT,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
