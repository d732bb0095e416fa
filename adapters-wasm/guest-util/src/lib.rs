//! Helpers shared by the guest components. Hand-written so guests stay small and dependency-free.

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
    fn keeps_malformed_escapes() {
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }
}
