//! The floor: a component served the way `wasmtime serve` serves one, with the same wasmtime:
//! wasmtime's own defaults (its pooling allocator's included, as `serve` turns it on where
//! the address space allows), one pre-linked instance (`ProxyPre` for a `wasi:http` guest), and
//! per request a fresh store holding an empty WASI context and nothing else: no limits, no
//! deadline, no places to take, no span. A guest of the project's world is called through its
//! `handle-http` export; of the contract's imports only `registry.touch` (a no-op here) does
//! anything, the others trap, and the echo routes call no other.

use std::future::Future;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime::component::{
    Component, ComponentExportIndex, InstancePre, Linker, ResourceTable, Val, types::ComponentItem,
};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::{
    RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

struct Host {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: NoOutbound,
}

/// `serve`'s default hooks, but for sending: the floor's guests send nothing (and the crate is
/// built without its default sender).
struct NoOutbound;

type Sent = wasmtime_wasi_http::Result<(
    http::Response<WasiBody>,
    Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
)>;

impl WasiHttpHooks for NoOutbound {
    fn send_request(
        &mut self,
        _: http::Request<WasiBody>,
        _: Option<RequestOptions>,
        _: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        Box::new(async { Err(wasmtime_wasi_http::Error::ConnectionLimitReached) })
    }
}

impl WasiView for Host {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Host {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            hooks: &mut self.hooks,
            table: &mut self.table,
            ctx: &mut self.http,
        }
    }
}

enum Guest {
    Proxy(ProxyPre<Host>),
    Contract {
        pre: InstancePre<Host>,
        handle_http: ComponentExportIndex,
    },
}

pub struct BareHost {
    engine: Engine,
    guest: Guest,
}

impl BareHost {
    pub fn load(wasm: &[u8]) -> Self {
        let mut config = Config::new();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(
            PoolingAllocationConfig::default(),
        ));
        let engine = Engine::new(&config).unwrap();
        let component = Component::new(&engine, wasm).unwrap();
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).unwrap();
        let handler = component
            .component_type()
            .exports(&engine)
            .map(|(name, _)| name.to_owned())
            .find(|name| name.starts_with("service:adapter/handler@"));
        let guest = match handler {
            None => {
                Guest::Proxy(ProxyPre::new(linker.instantiate_pre(&component).unwrap()).unwrap())
            }
            Some(interface) => {
                stub_contract(&engine, &component, &mut linker);
                let instance = component.get_export_index(None, &interface).unwrap();
                let handle_http = component
                    .get_export_index(Some(&instance), "handle-http")
                    .unwrap();
                Guest::Contract {
                    pre: linker.instantiate_pre(&component).unwrap(),
                    handle_http,
                }
            }
        };
        Self { engine, guest }
    }

    /// One `GET path` in a fresh instance; the answer's status.
    pub async fn get(&self, path: &str) -> u16 {
        let mut store = Store::new(
            &self.engine,
            Host {
                table: ResourceTable::new(),
                wasi: WasiCtx::builder().build(),
                http: WasiHttpCtx::new(),
                hooks: NoOutbound,
            },
        );
        match &self.guest {
            Guest::Proxy(pre) => {
                let request = hyper::Request::get(format!("http://localhost{path}"))
                    .body(Full::new(Bytes::new()))
                    .unwrap();
                let (sender, receiver) = tokio::sync::oneshot::channel();
                let mut http = store.data_mut().http();
                let request = http.new_incoming_request(Scheme::Http, request).unwrap();
                let out = http.new_response_outparam(sender).unwrap();
                let proxy = pre.instantiate_async(&mut store).await.unwrap();
                // `serve` runs the guest in a task of its own and answers from the channel.
                let call = tokio::spawn(async move {
                    proxy
                        .wasi_http_incoming_handler()
                        .call_handle(&mut store, request, out)
                        .await
                });
                let response = receiver.await.unwrap().unwrap();
                let status = response.status().as_u16();
                response.into_body().collect().await.unwrap();
                call.await.unwrap().unwrap();
                status
            }
            Guest::Contract { pre, handle_http } => {
                let instance = pre.instantiate_async(&mut store).await.unwrap();
                let func = instance.get_func(&mut store, handle_http).unwrap();
                let text = |s: &str| Val::String(s.into());
                let request = Val::Record(vec![
                    ("method".into(), text("GET")),
                    ("path".into(), text(path)),
                    ("query".into(), text("")),
                    ("headers".into(), Val::List(vec![])),
                    ("body".into(), Val::List(vec![])),
                ]);
                let mut results = [Val::Bool(false)];
                func.call_async(&mut store, &[request], &mut results)
                    .await
                    .unwrap();
                match &results[0] {
                    Val::Record(fields) => match fields.iter().find(|(n, _)| n == "status") {
                        Some((_, Val::U16(status))) => *status,
                        other => panic!("no status in the answer: {other:?}"),
                    },
                    other => panic!("not an http-response: {other:?}"),
                }
            }
        }
    }
}

/// The contract's imports: `registry.touch` (a request marks its adapter active) does nothing,
/// the others trap.
fn stub_contract(engine: &Engine, component: &Component, linker: &mut Linker<Host>) {
    for (name, item) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(interface) = item.ty else {
            continue;
        };
        if !name.starts_with("service:adapter/") {
            continue;
        }
        let mut instance = linker.instance(name).unwrap();
        for (function, item) in interface.exports(engine) {
            if !matches!(item.ty, ComponentItem::ComponentFunc(_)) {
                continue;
            }
            let what = format!("{name}#{function}");
            if what.starts_with("service:adapter/registry@") && function == "touch" {
                instance.func_new(function, |_, _, _, _| Ok(())).unwrap();
            } else {
                instance
                    .func_new(function, move |_, _, _, _| {
                        Err(wasmtime::format_err!("{what} is not given by the floor"))
                    })
                    .unwrap();
            }
        }
    }
}

/// Serves `host` on a port of 127.0.0.1 as `wasmtime serve` does (HTTP/1.1, a task per
/// connection); its base URL. Each request is answered with the guest's status.
pub async fn serve(host: BareHost) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let host = std::sync::Arc::new(host);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let host = std::sync::Arc::clone(&host);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                    let host = std::sync::Arc::clone(&host);
                    async move {
                        let status = host.get(request.uri().path()).await;
                        hyper::Response::builder()
                            .status(status)
                            .body(Full::new(Bytes::new()))
                    }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    url
}
