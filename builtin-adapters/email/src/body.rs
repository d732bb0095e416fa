//! The text a message asks: its text parts (an HTML-only message converted to text, charsets
//! decoded by the MIME parser), without the quoted history of earlier replies, cut to a bound.

use mail_parser::Message;

/// Appended where a body was cut.
pub const TRUNCATED: &str = "[... message truncated]";

/// Every text body of the message, in order. In `multipart/alternative` the parser lists the
/// `text/plain` alternative here and the HTML one only when there is no plain text.
pub fn text_of(message: &Message<'_>) -> String {
    let parts: Vec<String> = (0..message.text_body_count())
        .filter_map(|index| message.body_text(index))
        .map(|text| text.replace("\r\n", "\n"))
        .filter(|text| !text.trim().is_empty())
        .collect();
    parts.join("\n\n")
}

/// `text` without a trailing block of `>`-quoted lines and the "On ... wrote:" line that
/// introduces it, and without an Outlook-style "-----Original Message-----" tail. Quotes
/// answered inline are kept. A message that is nothing but a quote is kept whole.
pub fn without_quoted_history(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let quote = |line: &&str| line.trim_start().starts_with('>');
    let mut end = lines
        .iter()
        .position(|line| {
            let line = line.trim();
            line.starts_with("-----")
                && line.ends_with("-----")
                && line.contains("Original Message")
        })
        .unwrap_or(lines.len());
    // Walk back over the quote block at the end and the blank lines around it.
    let mut cut = end;
    while cut > 0 && (quote(&lines[cut - 1]) || lines[cut - 1].trim().is_empty()) {
        cut -= 1;
    }
    if lines[cut..end].iter().any(quote) {
        end = cut;
        if end > 0 && lines[end - 1].trim_end().ends_with("wrote:") {
            end -= 1;
        }
    }
    let kept = lines[..end].join("\n");
    if kept.trim().is_empty() {
        text.trim().to_owned()
    } else {
        kept.trim().to_owned()
    }
}

/// At most `max_chars` characters of `text`, with [`TRUNCATED`] after a cut.
pub fn bounded(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}\n{TRUNCATED}", text[..cut].trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use mail_parser::MessageParser;

    use super::*;

    fn text(raw: &str) -> String {
        let message = MessageParser::default().parse(raw.as_bytes()).unwrap();
        text_of(&message)
    }

    #[test]
    fn plain_text_is_preferred_in_alternatives() {
        let raw = "From: a@example.org\r\nSubject: x\r\nMIME-Version: 1.0\r\n\
            Content-Type: multipart/alternative; boundary=\"b\"\r\n\r\n\
            --b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nPlain words\r\n\
            --b\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>HTML words</p>\r\n--b--\r\n";
        assert_eq!(text(raw), "Plain words");
    }

    #[test]
    fn html_only_mail_becomes_text() {
        let raw = "From: a@example.org\r\nSubject: x\r\nContent-Type: text/html\r\n\r\n\
            <html><body><p>Hello <b>there</b></p><p>Second&nbsp;para</p></body></html>\r\n";
        let text = text(raw);
        assert!(text.contains("Hello there"), "{text:?}");
        assert!(
            text.contains("Second\u{a0}para") || text.contains("Second para"),
            "{text:?}"
        );
        assert!(!text.contains('<'), "{text:?}");
    }

    #[test]
    fn latin1_is_decoded() {
        let mut raw = b"From: a@example.org\r\nSubject: x\r\n\
            Content-Type: text/plain; charset=ISO-8859-1\r\n\r\nCaf"
            .to_vec();
        raw.extend([0xE9, b' ', 0xE0, b' ', 0xFC, b'\r', b'\n']);
        let message = MessageParser::default().parse(&raw).unwrap();
        assert_eq!(text_of(&message), "Caf\u{e9} \u{e0} \u{fc}\n");
    }

    #[test]
    fn trailing_quotes_and_their_attribution_go() {
        let reply = "Thanks, one more question.\n\nOn Mon, 3 Nov 2025, Bot <bot@example.org> \
            wrote:\n> Earlier answer\n>\n> > older\n";
        assert_eq!(without_quoted_history(reply), "Thanks, one more question.");
        let outlook = "Sounds good.\r\n\r\n-----Original Message-----\r\nFrom: Bot\r\nOld text";
        assert_eq!(without_quoted_history(outlook), "Sounds good.");
    }

    #[test]
    fn inline_answers_and_pure_quotes_are_kept() {
        let inline = "> first point?\nyes\n> second point?\nno";
        assert_eq!(without_quoted_history(inline), inline);
        let only_quote = "> just forwarding this\n> along";
        assert_eq!(without_quoted_history(only_quote), only_quote);
        assert_eq!(without_quoted_history("  plain  \n"), "plain");
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        assert_eq!(bounded("short", 10), "short");
        assert_eq!(bounded("ééééé", 3), format!("ééé\n{TRUNCATED}"));
        assert_eq!(bounded("abc def", 4), format!("abc\n{TRUNCATED}"));
    }
}
