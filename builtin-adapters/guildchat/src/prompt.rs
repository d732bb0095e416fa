//! What a message asks: its text without the bot's mention, and a short thread name for it.

/// The platform's limit on a thread name.
const THREAD_NAME_CHARS: usize = 100;
/// "Named after the first few words of the prompt" (spec 4.3 rule 4).
const THREAD_NAME_WORDS: usize = 6;

/// The message text with mentions of the bot (`<@id>` and the older `<@!id>`) removed.
pub fn without_mention(content: &str, bot_id: u64) -> String {
    content
        .replace(&format!("<@{bot_id}>"), " ")
        .replace(&format!("<@!{bot_id}>"), " ")
        .trim()
        .to_owned()
}

/// The first few words of the prompt, skipping mentions and channel or role references, which
/// would show as raw markup in a thread name.
pub fn thread_name(prompt: &str) -> String {
    let words: Vec<&str> = prompt
        .split_whitespace()
        .filter(|word| !(word.starts_with('<') && word.ends_with('>')))
        .take(THREAD_NAME_WORDS)
        .collect();
    let name: String = words.join(" ").chars().take(THREAD_NAME_CHARS).collect();
    if name.is_empty() {
        "task".to_owned()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bots_mention_is_removed_in_both_forms() {
        assert_eq!(
            without_mention("<@42> what is 2+2? cc <@7>", 42),
            "what is 2+2? cc <@7>"
        );
        assert_eq!(without_mention("hey <@!42>, help", 42), "hey  , help");
        assert_eq!(without_mention("<@42>", 42), "");
    }

    #[test]
    fn threads_are_named_after_the_first_words() {
        assert_eq!(
            thread_name("  Summarise the\nlatest   release notes for the team please"),
            "Summarise the latest release notes for"
        );
        assert_eq!(thread_name("<@42> <#9> deploy now"), "deploy now");
        assert_eq!(thread_name("<@42>"), "task");
        let long = "x".repeat(300);
        assert_eq!(thread_name(&long).chars().count(), 100);
    }
}
