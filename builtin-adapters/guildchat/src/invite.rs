//! What the bot is invited with (spec 4.3): scopes `bot` and `applications.commands`, and exactly
//! these permissions. Administrator is never requested.

pub const SCOPES: [&str; 2] = ["bot", "applications.commands"];

const ADD_REACTIONS: u64 = 1 << 6;
const VIEW_CHANNEL: u64 = 1 << 10;
const SEND_MESSAGES: u64 = 1 << 11;
const MANAGE_MESSAGES: u64 = 1 << 13;
const EMBED_LINKS: u64 = 1 << 14;
const READ_MESSAGE_HISTORY: u64 = 1 << 16;
const CREATE_PUBLIC_THREADS: u64 = 1 << 34;
const SEND_MESSAGES_IN_THREADS: u64 = 1 << 38;

/// The permission integer of the invite URL.
pub const PERMISSIONS: u64 = VIEW_CHANNEL
    | SEND_MESSAGES
    | ADD_REACTIONS
    | MANAGE_MESSAGES
    | EMBED_LINKS
    | READ_MESSAGE_HISTORY
    | CREATE_PUBLIC_THREADS
    | SEND_MESSAGES_IN_THREADS;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_permission_integer_is_the_documented_one_without_administrator() {
        const ADMINISTRATOR: u64 = 1 << 3;
        assert_eq!(PERMISSIONS, 292_057_869_376);
        assert_eq!(PERMISSIONS & ADMINISTRATOR, 0);
    }
}
