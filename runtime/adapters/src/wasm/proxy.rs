//! Serving a standard `wasi:http/proxy` component. The request it gets is the one the client
//! sent, with the path below `/api/adapters/<name>` (`/` for the prefix itself) and an
//! `x-forwarded-prefix` header naming the prefix, so it can build its own links. The response
//! it sets is read back while the guest writes its body, up to the cap every adapter answer
//! has; the host then checks and fences it like any other.

use std::pin::pin;

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::{Either, select};
use http_body_util::{BodyExt, Full};
use service_contract::{HttpRequest, HttpResponse};
use tokio::sync::oneshot;
use wasmtime::Store;
use wasmtime::component::Instance;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use super::state::HostState;
use crate::adapters::response::MAX_BODY_BYTES;

/// Where the guest's `wasi:http/incoming-handler` is.
pub(crate) type Indices =
    wasmtime_wasi_http::p2::bindings::exports::wasi::http::incoming_handler::GuestIndices;

/// Names the prefix the component is served under.
const PREFIX_HEADER: &str = "x-forwarded-prefix";

type Answer = Result<hyper::Response<HyperOutgoingBody>, ErrorCode>;

/// Calls the guest's `handle` with `request` and reads back what it answers.
pub(super) async fn handle(
    store: &mut Store<HostState>,
    instance: &Instance,
    indices: &Indices,
    request: HttpRequest,
) -> wasmtime::Result<HttpResponse> {
    let prefix = format!("/api/adapters/{}", store.data().caller.adapter);
    let (sender, receiver) = oneshot::channel::<Answer>();
    let mut http = store.data_mut().http();
    let request = http.new_incoming_request(Scheme::Http, incoming(request, &prefix)?)?;
    let out = http.new_response_outparam(sender)?;
    let guest = indices.load(&mut *store, instance)?;

    let mut answer = pin!(read_answer(receiver));
    let mut cut = false;
    let answered = {
        let call = pin!(guest.call_handle(&mut *store, request, out));
        match select(call, answer.as_mut()).await {
            Either::Left((called, _)) => {
                called?;
                None
            }
            // A body past the cap ends the call (the guest may be blocked writing more).
            Either::Right((answered, call)) => match answered {
                Ok(response) if response.body.len() <= MAX_BODY_BYTES => {
                    // The guest may go on after answering (wasi:http allows it), within its
                    // deadline.
                    call.await?;
                    Some(Ok(response))
                }
                other => {
                    cut = true;
                    Some(other)
                }
            },
        }
    };
    if cut {
        // The call was dropped where it stood: the instance is not used again.
        store.data_mut().unfit = true;
    }
    match answered {
        Some(answered) => answered,
        None => {
            // The guest has returned. An answer it finished is all there already; for one it
            // left unfinished (a body never ended), what it left in its table goes, so the
            // answer ends where it stopped.
            if let Some(answered) = answer.as_mut().now_or_never() {
                return answered;
            }
            store.data_mut().drop_resources();
            answer.await
        }
    }
}

/// The request as `wasi:http` gives it to the guest.
fn incoming(request: HttpRequest, prefix: &str) -> wasmtime::Result<hyper::Request<Full<Bytes>>> {
    let path = match request.query.is_empty() {
        true => request.path,
        false => format!("{}?{}", request.path, request.query),
    };
    // A client's odd Host is no failure of the adapter's.
    let authority = request
        .headers
        .iter()
        .find(|(name, _)| name == "host")
        .and_then(|(_, value)| value.parse::<http::uri::Authority>().ok())
        .unwrap_or(http::uri::Authority::from_static("localhost"));
    let uri = http::Uri::builder()
        .scheme("http")
        .authority(authority)
        .path_and_query(path)
        .build()?;
    let mut builder = hyper::Request::builder()
        .method(request.method.as_str())
        .uri(uri);
    for (name, value) in &request.headers {
        // The prefix is the host's to say.
        if name != PREFIX_HEADER {
            builder = builder.header(name, value);
        }
    }
    Ok(builder
        .header(PREFIX_HEADER, prefix)
        .body(Full::new(Bytes::from(request.body)))?)
}

/// The response the guest sets, its body read up to one byte past the cap (the supervisor
/// refuses that answer as too large).
async fn read_answer(receiver: oneshot::Receiver<Answer>) -> wasmtime::Result<HttpResponse> {
    let response = match receiver.await {
        Ok(Ok(response)) => response,
        Ok(Err(code)) => wasmtime::bail!("the component answered with error {code:?}"),
        Err(_) => wasmtime::bail!("the component returned without setting a response"),
    };
    let (parts, mut body) = response.into_parts();
    let mut bytes = Vec::new();
    while bytes.len() <= MAX_BODY_BYTES {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    bytes.extend_from_slice(&data);
                }
            }
            Some(Err(e)) => wasmtime::bail!("its response body failed: {e}"),
            None => break,
        }
    }
    Ok(HttpResponse {
        status: parts.status.as_u16(),
        headers: parts
            .headers
            .iter()
            .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
            .collect(),
        body: bytes,
    })
}
