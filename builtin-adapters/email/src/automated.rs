//! Mail that a machine sent: auto-replies, bounces, reports and list or bulk mail. Answering
//! it is how two robots end up mailing each other forever (RFC 3834), so it is never answered.

use mail_parser::{Message, MimeHeaders};

/// Why the message looks machine-sent, if it does.
pub fn automated(message: &Message<'_>) -> Option<String> {
    if let Some(value) = raw(message, "Auto-Submitted") {
        let token = value.split(';').next().unwrap_or_default().trim();
        if !token.eq_ignore_ascii_case("no") {
            return Some(format!("it is automated (Auto-Submitted: {value})"));
        }
    }
    if let Some(value) = raw(message, "Precedence") {
        let lowered = value.to_ascii_lowercase();
        if ["bulk", "list", "junk", "auto_reply"].contains(&lowered.as_str()) {
            return Some(format!(
                "it is bulk or automated mail (Precedence: {value})"
            ));
        }
    }
    for name in ["List-Id", "List-Unsubscribe"] {
        if raw(message, name).is_some() {
            return Some(format!("it is list mail ({name})"));
        }
    }
    // Vacation responders that predate RFC 3834.
    for name in ["X-Autoreply", "X-Autorespond"] {
        if raw(message, name).is_some() {
            return Some(format!("it is an auto-reply ({name})"));
        }
    }
    if raw(message, "Return-Path").as_deref() == Some("<>") {
        return Some("it is a bounce (empty Return-Path)".to_owned());
    }
    let report = message.content_type().is_some_and(|ct| {
        ct.ctype().eq_ignore_ascii_case("multipart")
            && ct
                .subtype()
                .is_some_and(|sub| sub.eq_ignore_ascii_case("report"))
    });
    if report {
        return Some("it is a delivery or read report (multipart/report)".to_owned());
    }
    None
}

/// A header's value as written, unfolded and trimmed.
fn raw(message: &Message<'_>, name: &str) -> Option<String> {
    let value = message.header_raw(name)?;
    Some(value.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use mail_parser::MessageParser;

    use super::*;

    fn reason(headers: &str) -> Option<String> {
        let raw = format!("From: a@example.org\r\nSubject: s\r\n{headers}\r\nbody\r\n");
        automated(&MessageParser::default().parse(raw.as_bytes()).unwrap())
    }

    #[test]
    fn people_writing_are_not_automated() {
        assert_eq!(reason(""), None);
        assert_eq!(reason("Auto-Submitted: no\r\n"), None);
        assert_eq!(reason("Auto-Submitted: No ; comment\r\n"), None);
        assert_eq!(reason("Precedence: first-class\r\n"), None);
    }

    #[test]
    fn auto_replies_bulk_lists_and_bounces_are() {
        for (headers, expected) in [
            (
                "Auto-Submitted: auto-replied\r\n",
                "it is automated (Auto-Submitted: auto-replied)",
            ),
            (
                "Auto-Submitted: auto-generated; owner-email=x@example.org\r\n",
                "it is automated (Auto-Submitted: auto-generated; owner-email=x@example.org)",
            ),
            (
                "Precedence: BULK\r\n",
                "it is bulk or automated mail (Precedence: BULK)",
            ),
            (
                "Precedence: list\r\n",
                "it is bulk or automated mail (Precedence: list)",
            ),
            (
                "Precedence: junk\r\n",
                "it is bulk or automated mail (Precedence: junk)",
            ),
            (
                "List-Id: <news.example.org>\r\n",
                "it is list mail (List-Id)",
            ),
            (
                "List-Unsubscribe:\r\n <mailto:leave@example.org>\r\n",
                "it is list mail (List-Unsubscribe)",
            ),
            ("X-Autoreply: yes\r\n", "it is an auto-reply (X-Autoreply)"),
            ("Return-Path: <>\r\n", "it is a bounce (empty Return-Path)"),
            (
                "Content-Type: multipart/report; report-type=delivery-status; boundary=x\r\n",
                "it is a delivery or read report (multipart/report)",
            ),
        ] {
            assert_eq!(reason(headers).as_deref(), Some(expected), "{headers:?}");
        }
    }
}
