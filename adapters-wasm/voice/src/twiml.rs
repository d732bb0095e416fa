//! The TwiML answers of the conversation: say something and listen for speech, or say
//! something and hang up.

/// XML text and attribute escaping.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not XML.
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn document(verbs: &str) -> String {
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response>{verbs}</Response>")
}

/// Says `text` and posts what the callee says next to `action` (also when they say nothing,
/// so silence is seen).
pub fn ask(text: &str, action: &str) -> String {
    document(&format!(
        "<Gather input=\"speech\" action=\"{}\" method=\"POST\" speechTimeout=\"auto\" actionOnEmptyResult=\"true\"><Say>{}</Say></Gather>",
        escape(action),
        escape(text)
    ))
}

/// Says `text` and ends the call.
pub fn finish(text: &str) -> String {
    document(&format!("<Say>{}</Say><Hangup/>", escape(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_it_says() {
        let twiml = ask(
            "Fish & chips <for> \"four\"?",
            "https://h.example/a?x=1&y=2",
        );
        assert!(twiml.contains("action=\"https://h.example/a?x=1&amp;y=2\""));
        assert!(twiml.contains("<Say>Fish &amp; chips &lt;for&gt; &quot;four&quot;?</Say>"));
        assert!(finish("Bye\u{7}").contains("<Say>Bye </Say><Hangup/></Response>"));
    }
}
