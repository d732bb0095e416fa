//! A reply longer than one message becomes several, in order: each within the limit, cut
//! between paragraphs, lines or words (never mid-word), and never inside a ``` block. A block
//! longer than a whole message is closed at a line end and reopened in the next message, so
//! every message shows well-formed code.

/// The platform's advice for one message's text (it truncates far longer ones).
pub const MESSAGE_CHARS: usize = 4_000;

const FENCE: &str = "```";
/// What closing a block at a cut adds to a message (`\n```).
const CLOSE_CHARS: usize = 4;

/// `text` as messages of at most `limit` characters (one, empty, for an empty text).
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text.trim().to_owned();
    while rest.chars().count() > limit {
        let (head, tail) = cut(&rest, limit);
        parts.push(head);
        rest = tail;
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest);
    }
    parts
}

/// A place to cut: its byte offset and how many characters come before it.
#[derive(Clone, Copy)]
struct At {
    byte: usize,
    chars: usize,
}

/// Where a window of `limit` characters may be cut, found in one pass.
#[derive(Default)]
struct Breaks {
    paragraph: Option<At>,
    line: Option<At>,
    space: Option<At>,
    /// Where the ``` block still open at the window's end begins.
    block: Option<At>,
    /// The last line end inside that block.
    code_line: Option<At>,
}

impl Breaks {
    fn scan(text: &str, limit: usize) -> Self {
        let mut found = Self::default();
        let mut chars = 0;
        let mut iter = text.char_indices();
        while let Some((byte, c)) = iter.next() {
            if chars >= limit {
                break;
            }
            let at = Some(At { byte, chars });
            if text[byte..].starts_with(FENCE) {
                found.block = if found.block.is_some() { None } else { at };
                found.code_line = None;
                iter.nth(FENCE.len() - 2);
                chars += FENCE.len();
                continue;
            }
            if let Some(block) = found.block {
                // Not the fence's own line end: that would leave an empty block behind.
                if c == '\n' && byte > block.byte + FENCE.len() && chars + CLOSE_CHARS <= limit {
                    found.code_line = at;
                }
            } else if c == '\n' {
                if text[..byte].ends_with('\n') {
                    found.paragraph = at;
                }
                found.line = at;
            } else if c == ' ' || c == '\t' {
                found.space = at;
            }
            chars += 1;
        }
        found
    }

    /// The best prose break: a paragraph, else a line, else a word boundary, taken from the
    /// window's second half when there is one there (so messages stay full), else the last.
    fn prose(&self, limit: usize) -> Option<At> {
        let kinds = [self.paragraph, self.line, self.space];
        kinds
            .iter()
            .flatten()
            .find(|at| at.chars >= limit / 2)
            .or_else(|| kinds.iter().flatten().max_by_key(|at| at.byte))
            .copied()
    }
}

/// The first message of `text` (longer than `limit`), and what remains.
fn cut(text: &str, limit: usize) -> (String, String) {
    let breaks = Breaks::scan(text, limit);
    if let Some(at) = breaks.prose(limit) {
        return (
            text[..at.byte].trim_end().to_owned(),
            text[at.byte..].trim_start().to_owned(),
        );
    }
    if let Some(block) = breaks.block {
        if block.byte > 0 {
            // Glued to the word before it: the block starts the next message.
            return (
                text[..block.byte].trim_end().to_owned(),
                text[block.byte..].to_owned(),
            );
        }
        // The block is larger than a message: close it here, reopen it in the next one.
        let (head, tail) = match breaks.code_line {
            Some(at) => (&text[..at.byte], &text[at.byte + 1..]),
            None => text.split_at(byte_of_char(text, limit - CLOSE_CHARS)),
        };
        return (format!("{head}\n{FENCE}"), format!("{FENCE}\n{tail}"));
    }
    // One word longer than a message: nothing else to do but cut it.
    let (head, tail) = text.split_at(byte_of_char(text, limit));
    (head.to_owned(), tail.trim_start().to_owned())
}

fn byte_of_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(b, _)| b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fences(part: &str) -> usize {
        part.matches(FENCE).count()
    }

    fn words(text: &str) -> Vec<&str> {
        text.split_whitespace().filter(|w| *w != FENCE).collect()
    }

    #[test]
    fn a_short_reply_is_one_message() {
        assert_eq!(split("  hello  ", 10), ["hello"]);
        assert_eq!(split("", 10), [""]);
    }

    #[test]
    fn cuts_between_paragraphs_then_lines_then_words() {
        let text = format!("{}\n\n{}", "a".repeat(30), "b ".repeat(20));
        assert_eq!(split(&text, 50)[0], "a".repeat(30));

        let text = format!("{}\n{} {}", "a ".repeat(15), "b".repeat(10), "c".repeat(10));
        assert_eq!(split(&text, 40)[0], "a ".repeat(15).trim_end());

        let parts = split(&"word ".repeat(100), 42);
        assert!(parts.iter().all(|p| p.chars().count() <= 42));
        assert!(parts.iter().all(|p| p.split(' ').all(|w| w == "word")));
        assert_eq!(words(&parts.join(" ")), words(&"word ".repeat(100)));
    }

    #[test]
    fn a_paragraph_break_early_in_the_window_does_not_leave_a_short_message() {
        let text = format!("intro\n\n{}", "long words ".repeat(20));
        let parts = split(&text, 60);
        assert!(parts[0].starts_with("intro\n\nlong"), "{parts:?}");
    }

    #[test]
    fn never_cuts_inside_a_code_block() {
        let code = format!("```\n{}```", "let x = 1;\n".repeat(3));
        let text = format!("{} {code} {}", "before ".repeat(8), "after ".repeat(8));
        let parts = split(&text, code.len() + 10);
        assert!(parts.iter().all(|p| fences(p) % 2 == 0), "{parts:?}");
        assert!(parts.iter().any(|p| p.contains(&code)), "{parts:?}");
        assert_eq!(words(&parts.join(" ")), words(&text));
    }

    #[test]
    fn a_block_larger_than_a_message_is_closed_and_reopened() {
        let lines: Vec<String> = (0..40).map(|i| format!("line {i:02}")).collect();
        let text = format!("Here:\n```\n{}\n```\nDone.", lines.join("\n"));
        let parts = split(&text, 60);
        for part in &parts {
            assert!(part.chars().count() <= 60, "{part:?}");
            assert_eq!(fences(part) % 2, 0, "{part:?}");
        }
        // Every line arrives whole, once, in order.
        let seen: Vec<&str> = parts
            .iter()
            .flat_map(|p| p.lines())
            .filter(|l| l.starts_with("line "))
            .collect();
        assert_eq!(seen, lines);
        assert!(parts.last().unwrap().ends_with("Done."));
    }

    #[test]
    fn one_huge_word_or_code_line_is_cut_where_it_must() {
        let parts = split(&"x".repeat(25), 10);
        assert_eq!(parts, ["x".repeat(10), "x".repeat(10), "x".repeat(5)]);
        let parts = split(&format!("```{}```", "y".repeat(30)), 20);
        assert!(parts.iter().all(|p| p.chars().count() <= 20), "{parts:?}");
        assert!(parts.iter().all(|p| fences(p) % 2 == 0), "{parts:?}");
        let ys: usize = parts.iter().map(|p| p.matches('y').count()).sum();
        assert_eq!(ys, 30);
    }

    #[test]
    fn a_block_glued_to_a_word_moves_whole_to_the_next_message() {
        let text = format!("{}```{}```", "w".repeat(12), "c".repeat(10));
        let parts = split(&text, 20);
        assert_eq!(parts[0], "w".repeat(12));
        assert_eq!(parts[1], format!("```{}```", "c".repeat(10)));
    }

    #[test]
    fn counts_characters_not_bytes() {
        let text = "é".repeat(30);
        let parts = split(&text, 10);
        assert_eq!(parts.len(), 3);
        assert!(parts.iter().all(|p| p.chars().count() == 10));
    }
}
