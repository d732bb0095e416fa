//! `{{secret:NAME}}` and `{{basic:USER:PASSWORD}}` in header (or environment) values: the host
//! fills them in after its checks, so a credential is named where it is configured and never
//! written there. Components' outbound requests, MCP servers' connections and remote A2A agents use them.

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;

/// Whether a value names a secret.
pub fn has_placeholder(value: &str) -> bool {
    value.contains("{{secret:") || value.contains("{{basic:")
}

/// Fills a value's placeholders: `{{secret:NAME}}` with `secret(NAME)`, and
/// `{{basic:USER:PASSWORD}}` with HTTP Basic credentials made of two secrets. Other `{{...}}`
/// stay as they are; an unterminated one is `malformed(reason)`.
pub fn fill<E>(
    value: &str,
    secret: impl Fn(&str) -> Result<String, E>,
    malformed: impl Fn(&str) -> E,
) -> Result<String, E> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| malformed("an unterminated {{...}} placeholder"))?;
        let placeholder = &after[..end];
        if let Some(name) = placeholder.strip_prefix("secret:") {
            out.push_str(&secret(name)?);
        } else if let Some((user, password)) = placeholder
            .strip_prefix("basic:")
            .and_then(|names| names.split_once(':'))
        {
            let pair = format!("{}:{}", secret(user)?, secret(password)?);
            out.push_str("Basic ");
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(pair));
        } else {
            out.push_str("{{");
            out.push_str(placeholder);
            out.push_str("}}");
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Fills every value of `values` (an MCP server's environment), naming the entry in an error.
pub(crate) fn fill_all(
    values: &BTreeMap<String, String>,
    secret: &(dyn Fn(&str) -> Result<String, String> + Sync),
) -> Result<BTreeMap<String, String>, String> {
    values
        .iter()
        .map(|(name, value)| {
            fill(value, secret, |m| format!("{name}: {m}")).map(|value| (name.clone(), value))
        })
        .collect()
}

/// Configured request headers, filled, as headers.
pub(crate) fn headers(
    headers: &BTreeMap<String, String>,
    secret: &(dyn Fn(&str) -> Result<String, String> + Sync),
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, String> {
    fill_all(headers, secret)?
        .into_iter()
        .map(|(name, value)| {
            let name = http::HeaderName::try_from(name.as_str())
                .map_err(|_| format!("{name:?} is not a header name"))?;
            // The value may hold a secret: the message names the header only.
            let value = http::HeaderValue::try_from(value.as_str())
                .map_err(|_| format!("the value of header {name} is not a valid header value"))?;
            Ok((name, value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_from_the_secrets_given() {
        let secret = |name: &str| match name {
            "TOKEN" => Ok("xoxb-1".to_owned()),
            "SID" => Ok("AC1".to_owned()),
            other => Err(format!("secret {other} is not granted")),
        };
        let fill = |value: &str| fill(value, secret, |m| format!("malformed: {m}"));
        assert_eq!(fill("Bearer {{secret:TOKEN}}").unwrap(), "Bearer xoxb-1");
        assert_eq!(
            fill("{{basic:SID:TOKEN}}").unwrap(),
            "Basic QUMxOnhveGItMQ=="
        );
        assert_eq!(fill("plain {{x}}").unwrap(), "plain {{x}}");
        assert_eq!(
            fill("{{secret:OTHER}}").unwrap_err(),
            "secret OTHER is not granted"
        );
        assert!(fill("{{secret:TOKEN").unwrap_err().starts_with("malformed"));
    }
}
