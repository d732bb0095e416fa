//! The provider's request signature: `X-Twilio-Signature` is the base64 HMAC-SHA1, keyed by
//! the auth token, of the full URL it requested followed by each POST parameter's name and
//! value, sorted by name. This component builds that string; the host checks the MAC, so the
//! token never enters the sandbox.

use guest_util::{Response, form_pairs, header};

use crate::HttpRequest;
use crate::service::adapter::secrets::{self, HmacAlgorithm};
use crate::settings::{self, AUTH_TOKEN};

/// The string the provider signs for a request to `url` with form `params`.
pub fn signed_text(url: &str, params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    let mut text = url.to_owned();
    for (name, value) in sorted {
        text.push_str(name);
        text.push_str(value);
    }
    text
}

/// Standard base64 (padding optional); `None` for anything else.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let text = text.trim().trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut buffer, mut bits) = (0u32, 0);
    for c in text.bytes() {
        buffer = (buffer << 6) | value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// `Ok` with the form's parameters when the request is the provider's; otherwise the answer.
pub fn verify(request: &HttpRequest) -> Result<Vec<(String, String)>, Response> {
    let (Some(url), true) = (
        settings::public_url(&request.path),
        secrets::is_set(AUTH_TOKEN),
    ) else {
        return Err(Response::error(
            503,
            "the voice adapter is not configured (see its entry in /api/adapters)",
        ));
    };
    let url = match request.query.is_empty() {
        true => url,
        false => format!("{url}?{}", request.query),
    };
    let params = form_pairs(&String::from_utf8_lossy(&request.body));
    let signature = header(&request.headers, "x-twilio-signature")
        .and_then(base64_decode)
        .ok_or_else(|| Response::error(401, "missing or malformed X-Twilio-Signature"))?;
    let text = signed_text(&url, &params);
    match secrets::verify_hmac(AUTH_TOKEN, HmacAlgorithm::Sha1, text.as_bytes(), &signature) {
        Ok(true) => Ok(params),
        Ok(false) => Err(Response::error(401, "invalid X-Twilio-Signature")),
        Err(e) => Err(Response::error(503, &e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_base64() {
        assert_eq!(base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("aGVsbG8").unwrap(), b"hello");
        assert_eq!(base64_decode("+/+/").unwrap(), [0xfb, 0xff, 0xbf]);
        assert_eq!(base64_decode("").unwrap(), b"");
        assert!(base64_decode("a*b=").is_none());
    }

    #[test]
    fn signs_the_url_and_the_sorted_parameters() {
        // The example of the provider's security documentation.
        let params: Vec<(String, String)> = [
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+12349013030"),
            ("Digits", "1234"),
            ("From", "+12349013030"),
            ("To", "+18005551212"),
        ]
        .iter()
        .rev()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        assert_eq!(
            signed_text("https://example.com/myapp.php?foo=1&bar=2", &params),
            "https://example.com/myapp.php?foo=1&bar=2CallSidCA1234567890ABCDECaller+12349013030Digits1234From+12349013030To+18005551212"
        );
    }
}
