//! Platform objects as the wire carries them: users, members, channels and messages.

use serde_json::{Value, json};

use super::GUILD_ID;

/// The bot's id, which is also its application's id.
pub const BOT_ID: u64 = 1_000;

pub fn bot_user() -> Value {
    json!({ "id": BOT_ID.to_string(), "username": "service-bot", "discriminator": "0",
            "global_name": null, "avatar": null, "bot": true })
}

pub fn human(id: u64) -> Value {
    json!({ "id": id.to_string(), "username": format!("user{id}"), "discriminator": "0",
            "global_name": null, "avatar": null })
}

pub fn member(user_id: u64, roles: &[u64]) -> Value {
    let roles: Vec<String> = roles.iter().map(u64::to_string).collect();
    json!({ "user": human(user_id), "roles": roles, "joined_at": "2026-01-01T00:00:00Z",
            "deaf": false, "mute": false, "flags": 0, "permissions": "0" })
}

pub fn channel_json(id: u64, name: &str, kind: u8, parent_id: Option<u64>) -> Value {
    json!({ "id": id.to_string(), "type": kind, "guild_id": GUILD_ID.to_string(), "name": name,
            "position": 0, "permission_overwrites": [], "nsfw": false,
            "parent_id": parent_id.map(|p| p.to_string()) })
}

/// A message as MESSAGE_CREATE carries it and REST returns it.
pub fn message_json(
    id: u64,
    channel_id: u64,
    guild_id: Option<u64>,
    author: Value,
    content: &str,
    mentions: Vec<Value>,
) -> Value {
    json!({
        "id": id.to_string(), "channel_id": channel_id.to_string(),
        "guild_id": guild_id.map(|g| g.to_string()),
        "author": author, "content": content, "timestamp": "2026-01-01T00:00:00Z",
        "edited_timestamp": null, "tts": false, "mention_everyone": false,
        "mentions": mentions, "mention_roles": [], "attachments": [], "embeds": [],
        "pinned": false, "type": 0
    })
}
