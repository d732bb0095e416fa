//! How a recording writes values: bytes as text (or base64 when they are not UTF-8), and no
//! secret's value anywhere.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

/// Values shorter than this are not searched for: a one-letter secret would blank out every
/// occurrence of its letter.
const SHORTEST_HIDDEN: usize = 4;

/// The secrets to hide: each value, and what stands in for it.
#[derive(Clone, Default)]
pub(crate) struct Secrets(Vec<(String, String)>);

impl Secrets {
    pub(crate) fn new(named: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut pairs: Vec<(String, String)> = named
            .into_iter()
            .filter(|(_, value)| value.len() >= SHORTEST_HIDDEN)
            .map(|(name, value)| (value, format!("{{{{secret:{name}}}}}")))
            .collect();
        // The longest first: a value containing another is replaced whole.
        pairs.sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
        Self(pairs)
    }

    pub(crate) fn hide_text(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (value, name) in &self.0 {
            if text.contains(value.as_str()) {
                text = text.replace(value.as_str(), name);
            }
        }
        text
    }

    fn hide_bytes(&self, bytes: Vec<u8>) -> Vec<u8> {
        let mut bytes = bytes;
        for (value, name) in &self.0 {
            let needle = value.as_bytes();
            if bytes.windows(needle.len()).any(|w| w == needle) {
                bytes = replace_bytes(&bytes, needle, name.as_bytes());
            }
        }
        bytes
    }

    /// `value` as a recording keeps it: byte lists written as text, secrets hidden.
    pub(crate) fn hidden(&self, mut value: Value) -> Value {
        self.hide(&mut value);
        value
    }

    /// In place: most of a value stays as it is, and maps are not rebuilt.
    pub(super) fn hide(&self, value: &mut Value) {
        match value {
            Value::String(text)
                if self
                    .0
                    .iter()
                    .any(|(secret, _)| text.contains(secret.as_str())) =>
            {
                *text = self.hide_text(text);
            }
            Value::Array(items) => match as_bytes(items) {
                Some(bytes) => *value = written_bytes(&self.hide_bytes(bytes)),
                None => items.iter_mut().for_each(|item| self.hide(item)),
            },
            // Bytes written already (an export's input and output): text is hidden as text
            // is, base64 once decoded.
            Value::Object(fields) if fields.len() == 1 && fields.contains_key("base64") => {
                if let Some(Ok(bytes)) = fields["base64"].as_str().map(|b| STANDARD.decode(b)) {
                    *value = written_bytes(&self.hide_bytes(bytes));
                }
            }
            Value::Object(fields) => fields.values_mut().for_each(|field| self.hide(field)),
            _ => {}
        }
    }
}

/// A list of numbers is bytes: the contract's only lists of numbers are `list<u8>` (bodies,
/// payloads, values, signatures). An empty list stays a list.
fn as_bytes(items: &[Value]) -> Option<Vec<u8>> {
    if items.is_empty() {
        return None;
    }
    items
        .iter()
        .map(|item| item.as_u64().and_then(|n| u8::try_from(n).ok()))
        .collect()
}

/// A recorded value as the import gave it: bytes written as text are a list of numbers again.
pub(super) fn unhidden(value: Value) -> Value {
    match value {
        Value::Object(fields) if fields.len() == 1 => {
            let bytes = match fields.iter().next() {
                Some((key, Value::String(text))) if key == "utf8" => Some(text.as_bytes().to_vec()),
                Some((key, Value::String(text))) if key == "base64" => STANDARD.decode(text).ok(),
                _ => None,
            };
            match bytes {
                Some(bytes) => Value::Array(bytes.into_iter().map(Value::from).collect()),
                None => Value::Object(fields.into_iter().map(|(k, v)| (k, unhidden(v))).collect()),
            }
        }
        Value::Object(fields) => {
            Value::Object(fields.into_iter().map(|(k, v)| (k, unhidden(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(unhidden).collect()),
        other => other,
    }
}

/// Bytes as a recording writes them.
pub(crate) fn written_bytes(bytes: &[u8]) -> Value {
    let mut field = Map::new();
    match std::str::from_utf8(bytes) {
        Ok(text) => field.insert("utf8".into(), Value::String(text.to_owned())),
        Err(_) => field.insert("base64".into(), Value::String(STANDARD.encode(bytes))),
    };
    Value::Object(field)
}

fn replace_bytes(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bytes_are_text_and_secrets_are_names() {
        let secrets = Secrets::new([
            ("TOKEN".to_owned(), "xoxb-secret-value".to_owned()),
            ("SHORT".to_owned(), "abc".to_owned()),
        ]);
        let value = json!({
            "body": b"auth=xoxb-secret-value&abc".to_vec(),
            "binary": [0xff, 0x00, 0x01],
            "empty": [],
            "headers": [["authorization", "Bearer xoxb-secret-value"]],
            "status": 200,
        });
        assert_eq!(
            secrets.hidden(value),
            json!({
                "body": {"utf8": "auth={{secret:TOKEN}}&abc"},
                "binary": {"base64": "/wAB"},
                "empty": [],
                "headers": [["authorization", "Bearer {{secret:TOKEN}}"]],
                "status": 200,
            })
        );
        let bytes = json!({"body": b"text".to_vec(), "binary": [0xff, 0x00], "empty": []});
        assert_eq!(unhidden(Secrets::default().hidden(bytes.clone())), bytes);
        // Bytes written already are hidden too.
        let mut binary = b"\xff token=xoxb-secret-value".to_vec();
        let written = json!({"body": written_bytes(&binary)});
        let hidden = unhidden(secrets.hidden(written));
        binary.truncate(8);
        binary.extend_from_slice(b"{{secret:TOKEN}}");
        assert_eq!(hidden, json!({"body": binary}));
    }
}
