//! What an adapter may answer: the host passes on a response only when HTTP can carry it and
//! it cannot act as the dashboard (see `http::components` for the headers the host sets).

use service_contract::HttpResponse;

/// The most headers an answer may have, and their bytes together.
pub(crate) const MAX_HEADERS: usize = 64;
pub(crate) const MAX_HEADER_BYTES: usize = 16 << 10;

/// The largest body an answer may have: what a client that reads slowly can make the server
/// hold for it, per connection.
pub(crate) const MAX_BODY_BYTES: usize = 4 << 20;

/// Why an answer cannot be passed on, if it cannot: a status outside 200-599 (1xx are not
/// final answers), too many or too large headers, a header HTTP cannot carry, or a body past
/// [`MAX_BODY_BYTES`].
pub(crate) fn check(response: &HttpResponse) -> Result<(), String> {
    if response.body.len() > MAX_BODY_BYTES {
        return Err(format!(
            "a body of {} bytes, more than {} MiB",
            response.body.len(),
            MAX_BODY_BYTES >> 20
        ));
    }
    if !(200..=599).contains(&response.status) {
        return Err(format!(
            "status {} is not a final HTTP status (200-599)",
            response.status
        ));
    }
    if response.headers.len() > MAX_HEADERS {
        return Err(format!(
            "{} headers, more than {MAX_HEADERS}",
            response.headers.len()
        ));
    }
    let bytes: usize = response
        .headers
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    if bytes > MAX_HEADER_BYTES {
        return Err(format!(
            "{bytes} bytes of headers, more than {MAX_HEADER_BYTES}"
        ));
    }
    for (name, value) in &response.headers {
        if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!("{name:?} is not a header name"));
        }
        if http::HeaderValue::from_str(value).is_err() {
            return Err(format!("the value of header {name:?} is not valid"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, headers: Vec<(String, String)>) -> HttpResponse {
        HttpResponse {
            status,
            headers,
            body: Vec::new(),
        }
    }

    #[test]
    fn only_answers_http_can_carry_pass() {
        assert!(check(&answer(200, vec![("x-a".into(), "1".into())])).is_ok());
        for status in [0, 100, 101, 199, 600, 999] {
            assert!(check(&answer(status, vec![])).is_err(), "{status}");
        }
        let many = (0..=MAX_HEADERS)
            .map(|i| (format!("x-{i}"), "v".into()))
            .collect();
        assert!(
            check(&answer(200, many))
                .unwrap_err()
                .contains("more than 64")
        );
        let big = vec![("x-big".into(), "v".repeat(MAX_HEADER_BYTES))];
        assert!(check(&answer(200, big)).is_err());
        assert!(check(&answer(200, vec![("bad name".into(), "v".into())])).is_err());
        assert!(check(&answer(200, vec![("x".into(), "line\nbreak".into())])).is_err());
        let mut large = answer(200, vec![]);
        large.body = vec![0; MAX_BODY_BYTES];
        assert!(check(&large).is_ok());
        large.body.push(0);
        assert!(check(&large).unwrap_err().contains("more than 4 MiB"));
    }
}
