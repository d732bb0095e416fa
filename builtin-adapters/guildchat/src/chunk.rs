//! Splitting a reply into posts of at most 2000 characters (spec 8). Posts break between
//! lines, then between words, and a code fence that fits in one post is never split. A fence
//! longer than a post is closed at the end of each part and reopened (with its language) at the
//! start of the next, so every post still renders as code.

/// The platform's limit on one message.
pub const MAX_POST_CHARS: usize = 2000;

const FENCE: &str = "```";
/// What closing a fence early adds to a part: a line break and the fence.
const EARLY_CLOSE_CHARS: usize = 4;

/// Splits `text` into posts of at most `limit` characters, in order. Blank text gives no posts.
pub fn split_reply(text: &str, limit: usize) -> Vec<String> {
    let mut posts = Posts::new(limit);
    for block in blocks(text) {
        match block {
            Block::Line(line) => posts.push_line(line),
            Block::Fence(lines) => match fence_parts(&lines, limit) {
                Some(parts) => parts.iter().for_each(|part| posts.push(part)),
                // A fence whose opening line is too long to repeat: split it like prose.
                None => lines.into_iter().for_each(|line| posts.push_line(line)),
            },
        }
    }
    posts.finish()
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

enum Block<'a> {
    Line(&'a str),
    /// A fenced code block, opening and (when present) closing lines included.
    Fence(Vec<&'a str>),
}

fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with(FENCE)
}

fn blocks(text: &str) -> Vec<Block<'_>> {
    let mut blocks = Vec::new();
    let mut fence: Option<Vec<&str>> = None;
    for line in text.split_inclusive('\n') {
        match fence.as_mut() {
            Some(lines) => {
                lines.push(line);
                if is_fence(line) {
                    blocks.extend(fence.take().map(Block::Fence));
                }
            }
            None if is_fence(line) => fence = Some(vec![line]),
            None => blocks.push(Block::Line(line)),
        }
    }
    // An unclosed fence runs to the end of the text.
    blocks.extend(fence.map(Block::Fence));
    blocks
}

/// The fence as parts of at most `limit` characters, each a complete fence (one part when it
/// fits); `None` when its opening line is too long to repeat in every part.
fn fence_parts(lines: &[&str], limit: usize) -> Option<Vec<String>> {
    let whole: String = lines.concat();
    if chars(&whole) <= limit {
        return Some(vec![whole]);
    }
    let (first, rest) = lines.split_first()?;
    let opener = first.trim_end().to_owned() + "\n";
    let (body, closer) = match rest {
        [body @ .., last] if is_fence(last) => (body, *last),
        body => (body, ""),
    };
    let overhead = chars(&opener) + chars(closer).max(EARLY_CLOSE_CHARS);
    if overhead >= limit / 2 {
        return None;
    }
    let budget = limit - overhead;
    let mut groups = Vec::new();
    let mut group = String::new();
    for piece in body.iter().flat_map(|line| split_words(line, budget)) {
        if !group.is_empty() && chars(&group) + chars(piece) > budget {
            groups.push(std::mem::take(&mut group));
        }
        group.push_str(piece);
    }
    groups.push(group);
    let last = groups.len() - 1;
    let parts = groups
        .into_iter()
        .enumerate()
        .map(|(i, group)| {
            let mut part = opener.clone() + &group;
            if i == last {
                part.push_str(closer);
            } else {
                if !part.ends_with('\n') {
                    part.push('\n');
                }
                part.push_str(FENCE);
            }
            part
        })
        .collect();
    Some(parts)
}

/// Pieces of at most `limit` characters, each cut after the last whitespace that fits, or
/// mid-word when a word alone is longer than `limit`.
fn split_words(text: &str, limit: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while chars(rest) > limit {
        let end = rest
            .char_indices()
            .nth(limit)
            .map_or(rest.len(), |(i, _)| i);
        let cut = rest[..end]
            .char_indices()
            .rev()
            .find(|&(i, c)| i > 0 && c.is_whitespace())
            .map_or(end, |(i, c)| i + c.len_utf8());
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}

/// Posts being filled, first to last.
struct Posts {
    limit: usize,
    done: Vec<String>,
    current: String,
    current_chars: usize,
}

impl Posts {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            done: Vec::new(),
            current: String::new(),
            current_chars: 0,
        }
    }

    fn push_line(&mut self, line: &str) {
        for piece in split_words(line, self.limit) {
            self.push(piece);
        }
    }

    /// Adds a piece of at most `limit` characters, starting a new post when it does not fit.
    fn push(&mut self, piece: &str) {
        let n = chars(piece);
        if self.current_chars + n > self.limit {
            self.flush();
        }
        self.current.push_str(piece);
        self.current_chars += n;
    }

    fn flush(&mut self) {
        // Line breaks at a boundary are what the split replaced; leading spaces may be code.
        let post = self.current.trim_end().trim_start_matches(['\n', '\r']);
        if !post.is_empty() {
            self.done.push(post.to_owned());
        }
        self.current.clear();
        self.current_chars = 0;
    }

    fn finish(mut self) -> Vec<String> {
        self.flush();
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_within_limit(posts: &[String], limit: usize) {
        for post in posts {
            assert!(chars(post) <= limit, "a post of {} chars", chars(post));
        }
    }

    #[test]
    fn short_and_blank_replies() {
        assert_eq!(split_reply("hello\nworld\n", 2000), ["hello\nworld"]);
        assert!(split_reply(" \n\n ", 2000).is_empty());
        let accents = "é".repeat(2000);
        assert_eq!(
            split_reply(&accents, 2000),
            [accents],
            "characters, not bytes"
        );
    }

    #[test]
    fn a_4500_character_reply_is_three_posts_split_between_lines() {
        let line = format!("{}\n", "x".repeat(89));
        let text = line.repeat(50);
        assert_eq!(chars(&text), 4500);
        let posts = split_reply(&text, MAX_POST_CHARS);
        assert_eq!(posts.len(), 3);
        assert_within_limit(&posts, MAX_POST_CHARS);
        assert_eq!(posts.join("\n"), text.trim_end(), "nothing lost or moved");
    }

    #[test]
    fn long_lines_break_between_words_and_long_words_anywhere() {
        let words = "lorem ipsum dolor sit amet ".repeat(200);
        let posts = split_reply(&words, 500);
        assert_within_limit(&posts, 500);
        for post in &posts {
            assert!(
                post.split(' ')
                    .all(|w| ["lorem", "ipsum", "dolor", "sit", "amet"].contains(&w))
            );
        }
        assert_eq!(posts.join(" "), words.trim_end());

        let word = "a".repeat(5000);
        let posts = split_reply(&word, MAX_POST_CHARS);
        let sizes: Vec<usize> = posts.iter().map(|p| chars(p)).collect();
        assert_eq!(sizes, [2000, 2000, 1000]);
    }

    #[test]
    fn a_fence_that_fits_a_post_moves_whole_to_the_next() {
        let prose = format!("{}\n", "p".repeat(99)).repeat(15);
        let fence = format!(
            "```rust\n{}```\n",
            format!("{}\n", "c".repeat(79)).repeat(10)
        );
        let posts = split_reply(&(prose.clone() + &fence + "after\n"), 2000);
        assert_eq!(posts.len(), 2);
        assert_eq!(posts[0], prose.trim_end());
        assert!(posts[1].starts_with("```rust\n") && posts[1].ends_with("```\nafter"));
    }

    #[test]
    fn a_fence_longer_than_a_post_is_closed_and_reopened() {
        let code = format!("{}\n", "let x = 1;".repeat(9)).repeat(60);
        let text = format!("Here:\n```rust\n{code}```\nDone.");
        let posts = split_reply(&text, 2000);
        assert!(posts.len() >= 3);
        assert_within_limit(&posts, 2000);
        for post in &posts {
            assert_eq!(
                post.matches(FENCE).count() % 2,
                0,
                "balanced fences in {post:?}"
            );
        }
        assert!(posts[0].starts_with("Here:\n```rust\n"));
        assert!(posts[1..].iter().all(|p| p.starts_with("```rust\n")));
        assert!(posts.last().unwrap().ends_with("```\nDone."));
        let code_lines: usize = posts.iter().map(|p| p.matches("let x").count()).sum();
        assert_eq!(code_lines, 9 * 60, "every line of code kept once");
    }

    #[test]
    fn an_unclosed_fence_runs_to_the_end() {
        let text = format!("```\n{}", "y\n".repeat(1500));
        let posts = split_reply(&text, 2000);
        assert_within_limit(&posts, 2000);
        assert!(posts.iter().all(|p| p.starts_with("```\n")));
        assert!(posts[..posts.len() - 1].iter().all(|p| p.ends_with("```")));
    }
}
