//! {{name}}: a standard `wasi:http/proxy` component. service-runtime serves it under
//! `/api/adapters/{{name}}/`; the request it gets has the path below that prefix (`/` for the
//! prefix itself) and the prefix in `x-forwarded-prefix`. It answers `GET /hello`, and 404
//! to anything else. Any `wasi:http` host (`wasmtime serve`, Spin, ...) runs it as it is.

use std::io::Write as _;

use wasi::http::types::{
    Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
};

wasi::http::proxy::export!(Component);

const NAME: &str = "{{name}}";
const VERSION: &str = env!("CARGO_PKG_VERSION");

struct Component;

impl wasi::exports::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path = request.path_with_query().unwrap_or_default();
        let path = path.split('?').next().unwrap_or_default();
        match (request.method(), path) {
            (Method::Get, "/hello") => respond(out, 200, &format!("hello from {NAME} {VERSION}")),
            _ => respond(out, 404, &format!("{NAME} has no route {path}")),
        }
    }
}

/// A plain-text answer.
fn respond(out: ResponseOutparam, status: u16, text: &str) {
    let headers = Fields::from_list(&[(
        "content-type".into(),
        b"text/plain; charset=utf-8".to_vec(),
    )])
    .expect("a valid header");
    let response = OutgoingResponse::new(headers);
    response.set_status_code(status).expect("a valid status");
    let body = response.body().expect("the body, taken once");
    ResponseOutparam::set(out, Ok(response));
    let mut stream = body.write().expect("the stream, taken once");
    // A client gone is no failure of ours.
    let _ = stream.write_all(text.as_bytes());
    drop(stream);
    let _ = OutgoingBody::finish(body, None);
}
