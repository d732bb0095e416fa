//! What every Rust guest needs besides its own logic: answers (plain, JSON, errors), request
//! parts (headers, query strings, forms), form encoding, and the parts of a signature check
//! that are not the host's (hex, freshness). No bindings: each component generates its own
//! from `wit/`, and turns a [`Response`] into its `http-response` with one `From` impl.

use serde_json::{Value, json};

/// An answer to a request, to turn into the component's `http-response`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// A `text/plain` answer.
    pub fn text(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self::new(status, "text/plain; charset=utf-8", body)
    }

    /// A JSON answer.
    pub fn json(status: u16, value: &Value) -> Self {
        Self::new(status, "application/json", value.to_string())
    }

    /// `{"error": message}`, the shape of every error of the API.
    pub fn error(status: u16, message: &str) -> Self {
        Self::json(status, &json!({ "error": message }))
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Decodes hex (either case); `None` for anything else.
pub fn hex_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The signature bytes of a header value such as `sha256=<hex>` or `v0=<hex>`.
pub fn signature(value: Option<&str>, prefix: &str) -> Option<Vec<u8>> {
    hex_decode(value?.strip_prefix(prefix)?)
}

/// Seconds since the Unix epoch (WASI's wall clock).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The first value of `key` in a raw query string (`a=1&b=x%2Fy`), percent-decoded.
///
/// Only `%XX` escapes are decoded; `+` is kept as is, so URLs and keys containing `+` survive.
pub fn query_param(query: &str, key: &str) -> Option<String> {
    query
        .split('&')
        .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
        .find(|(k, _)| percent_decode(k) == key)
        .map(|(_, v)| percent_decode(v))
}

/// The first value of `key` in an `application/x-www-form-urlencoded` body, where `+` is a
/// space (slash commands arrive this way).
pub fn form_field(body: &str, key: &str) -> Option<String> {
    query_param(&body.replace('+', "%20"), key)
}

/// Every `key=value` pair of an `application/x-www-form-urlencoded` body, decoded, in order.
pub fn form_pairs(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| percent_decode(&s.replace('+', "%20"));
            (decode(k), decode(v))
        })
        .collect()
}

/// An `application/x-www-form-urlencoded` body (or query string) of `pairs`.
pub fn form_encode<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                percent_encode(k.as_ref()),
                percent_encode(v.as_ref())
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so the text is safe in
/// a path segment, a query value or a form field.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The value of a header; names arrive lower case.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Decodes `%XX` escapes; a malformed escape is kept literally. Invalid UTF-8 is replaced.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_decodes() {
        let q = "a=1&url=http%3A%2F%2F127.0.0.1%3A9%2Fx%3Fy%3Dz&flag&k=a+b";
        assert_eq!(query_param(q, "a").as_deref(), Some("1"));
        assert_eq!(
            query_param(q, "url").as_deref(),
            Some("http://127.0.0.1:9/x?y=z")
        );
        assert_eq!(query_param(q, "flag").as_deref(), Some(""));
        assert_eq!(query_param(q, "k").as_deref(), Some("a+b"));
        assert_eq!(query_param(q, "missing"), None);
        assert_eq!(query_param("", "a"), None);
    }

    #[test]
    fn decodes_forms() {
        let body = "command=%2Fask&text=what+is+1%2B1%3F&user_id=U1";
        assert_eq!(form_field(body, "text").as_deref(), Some("what is 1+1?"));
        assert_eq!(form_field(body, "command").as_deref(), Some("/ask"));
        assert_eq!(form_field(body, "channel_id"), None);
    }

    #[test]
    fn round_trips_forms() {
        let pairs = [
            ("To", "+15551234567"),
            ("Url", "https://h.example/a b?c=d&e"),
        ];
        let body = form_encode(&pairs);
        assert_eq!(
            body,
            "To=%2B15551234567&Url=https%3A%2F%2Fh.example%2Fa%20b%3Fc%3Dd%26e"
        );
        let decoded = form_pairs(&body);
        assert_eq!(decoded[0], ("To".to_owned(), "+15551234567".to_owned()));
        assert_eq!(decoded[1].1, "https://h.example/a b?c=d&e");
        assert_eq!(
            form_pairs("SpeechResult=yes+please&&Empty=&Flag"),
            [
                ("SpeechResult".to_owned(), "yes please".to_owned()),
                ("Empty".to_owned(), String::new()),
                ("Flag".to_owned(), String::new()),
            ]
        );
    }

    #[test]
    fn decodes_hex_signatures() {
        assert_eq!(hex_decode("00ffA0"), Some(vec![0, 255, 160]));
        assert_eq!(hex_decode("abc"), None);
        assert_eq!(hex_decode("zz"), None);
        assert_eq!(signature(Some("v0=0a0b"), "v0="), Some(vec![10, 11]));
        assert_eq!(signature(Some("0a0b"), "v0="), None);
        assert_eq!(signature(None, "v0="), None);
    }

    #[test]
    fn answers_in_the_apis_shape() {
        let error = Response::error(401, "invalid signature");
        assert_eq!(error.status, 401);
        assert_eq!(error.body, br#"{"error":"invalid signature"}"#);
        assert_eq!(error.headers[0].1, "application/json");
    }

    #[test]
    fn encodes_what_a_query_value_cannot_hold() {
        assert_eq!(percent_encode("1700000000.000100"), "1700000000.000100");
        assert_eq!(percent_encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(percent_decode(&percent_encode("x?y=1&z")), "x?y=1&z");
    }

    #[test]
    fn keeps_malformed_escapes() {
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }
}
