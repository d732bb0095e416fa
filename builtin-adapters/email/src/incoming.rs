//! A fetched message, parsed into what the adapter uses: who wrote it, where a reply goes, how
//! to thread the reply, whether a machine sent it, and the text it asks.

use mail_parser::{HeaderValue, MessageParser};

use crate::automated::automated;
use crate::body;

/// Subjects longer than this are cut: the subject goes into the prompt and the reply's header.
const MAX_SUBJECT_CHARS: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    /// The author's address (From).
    pub from: Option<String>,
    /// Where the author wants replies (Reply-To), when not to the From address.
    pub reply_to: Option<String>,
    pub subject: String,
    /// Message ids without angle brackets.
    pub message_id: Option<String>,
    pub references: Vec<String>,
    pub in_reply_to: Vec<String>,
    /// The text, without quoted history, at most `max_body_chars` characters.
    pub body: String,
    /// Why it looks machine-sent, if it does.
    pub automated: Option<String>,
}

impl Incoming {
    /// The thread the message belongs to, named by its first message's id: the first of
    /// `References`, else what it replies to, else its own id.
    pub fn thread(&self) -> Option<String> {
        self.references
            .first()
            .or(self.in_reply_to.first())
            .or(self.message_id.as_ref())
            .cloned()
    }

    /// `None` when the bytes are not a message at all.
    pub fn parse(raw: &[u8], max_body_chars: usize) -> Option<Self> {
        let message = MessageParser::default().parse(raw)?;
        let first_address = |address: Option<&mail_parser::Address<'_>>| {
            address
                .and_then(|a| a.first())
                .and_then(|a| a.address())
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
        };
        let subject = message.subject().unwrap_or_default().trim();
        let text = body::text_of(&message);
        Some(Self {
            from: first_address(message.from()),
            reply_to: first_address(message.reply_to()),
            subject: subject.chars().take(MAX_SUBJECT_CHARS).collect(),
            message_id: message.message_id().map(str::to_owned),
            references: ids(message.references()),
            in_reply_to: ids(message.in_reply_to()),
            body: body::bounded(&body::without_quoted_history(&text), max_body_chars),
            automated: automated(&message),
        })
    }

    /// Where the reply goes.
    pub fn reply_address(&self) -> Option<&str> {
        self.reply_to.as_deref().or(self.from.as_deref())
    }
}

fn ids(value: &HeaderValue<'_>) -> Vec<String> {
    match value {
        HeaderValue::Text(id) => vec![id.to_string()],
        HeaderValue::TextList(ids) => ids.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_a_reply_needs_are_read() {
        let raw = "From: \"Alice A.\" <Alice@Example.org>\r\n\
            Reply-To: team@example.org\r\n\
            Subject: =?utf-8?q?Caf=C3=A9_plans?=\r\n\
            Message-ID: <m2@example.org>\r\n\
            In-Reply-To: <m1@example.org>\r\n\
            References: <m0@example.org>\r\n <m1@example.org>\r\n\
            \r\nWhere shall we meet?\r\n\r\nOn Monday, Bot wrote:\r\n> Somewhere\r\n";
        let incoming = Incoming::parse(raw.as_bytes(), 1000).unwrap();
        assert_eq!(
            incoming,
            Incoming {
                from: Some("Alice@Example.org".to_owned()),
                reply_to: Some("team@example.org".to_owned()),
                subject: "Café plans".to_owned(),
                message_id: Some("m2@example.org".to_owned()),
                references: vec!["m0@example.org".to_owned(), "m1@example.org".to_owned()],
                in_reply_to: vec!["m1@example.org".to_owned()],
                body: "Where shall we meet?".to_owned(),
                automated: None,
            }
        );
        assert_eq!(incoming.reply_address(), Some("team@example.org"));
    }

    #[test]
    fn the_body_and_subject_are_bounded() {
        let raw = format!(
            "From: a@example.org\r\nSubject: {}\r\n\r\n{}\r\n",
            "s".repeat(500),
            "word ".repeat(100)
        );
        let incoming = Incoming::parse(raw.as_bytes(), 20).unwrap();
        assert_eq!(
            incoming.body,
            format!("word word word word\n{}", body::TRUNCATED)
        );
        assert_eq!(incoming.subject, "s".repeat(200));
        assert_eq!(incoming.reply_address(), Some("a@example.org"));
    }
}
