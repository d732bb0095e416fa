//! Reading a reaction as feedback: thumbs up or down, in any skin tone; other emoji are not votes.

use service_contract::Vote;

pub fn vote_for(emoji: &str) -> Option<Vote> {
    // Skin tones (U+1F3FB..=U+1F3FF) and the emoji presentation selector do not change the vote.
    let base: String = emoji
        .chars()
        .filter(|c| !matches!(c, '\u{1F3FB}'..='\u{1F3FF}' | '\u{FE0F}'))
        .collect();
    match base.as_str() {
        "\u{1F44D}" => Some(Vote::Up),
        "\u{1F44E}" => Some(Vote::Down),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbs_are_votes_and_nothing_else_is() {
        assert_eq!(vote_for("👍"), Some(Vote::Up));
        assert_eq!(vote_for("👎🏽"), Some(Vote::Down));
        assert_eq!(vote_for("👍\u{FE0F}"), Some(Vote::Up));
        for other in ["❤️", "🎉", "👍👍", "", "thumbsup"] {
            assert_eq!(vote_for(other), None, "{other:?}");
        }
    }
}
