//! HTTP routes a native adapter serves under `/api/adapters/<name>/`, mounted in `bind`. The
//! request and response are plain records, the same as the WIT world's, so neither the contract
//! nor an adapter needs an HTTP framework.

use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::adapter::AdapterError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// Upper case: `GET`, `POST`, ...
    pub method: String,
    /// The path after `/api/adapters/<name>`, starting with `/`.
    pub path: String,
    /// The raw query string without the `?`.
    pub query: String,
    /// Header names are lower case.
    pub headers: Vec<(String, String)>,
    /// The raw body, exactly as received (signatures are computed over it).
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

pub type RouteHandler = Arc<dyn Fn(HttpRequest) -> BoxFuture<'static, HttpResponse> + Send + Sync>;

/// Paths the host keeps for itself under every adapter's prefix.
const RESERVED: &[&str] = &["/enable", "/disable"];

/// The routes of one adapter: exact method and path matches.
#[derive(Default)]
pub struct Routes {
    routes: Vec<(String, String, RouteHandler)>,
}

impl Routes {
    /// Serves `method path`; the path is relative to `/api/adapters/<name>` and starts with `/`.
    pub fn add<F, Fut>(&mut self, method: &str, path: &str, handler: F) -> Result<(), AdapterError>
    where
        F: Fn(HttpRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HttpResponse> + Send + 'static,
    {
        let method = method.to_ascii_uppercase();
        if !path.starts_with('/') || RESERVED.contains(&path) {
            return Err(AdapterError::config(format!(
                "route {method} {path} is not allowed: paths start with / and /enable, /disable are the host's"
            )));
        }
        if self.find(&method, path).is_some() {
            return Err(AdapterError::config(format!(
                "route {method} {path} is mounted twice"
            )));
        }
        let handler: RouteHandler = Arc::new(move |request| handler(request).boxed());
        self.routes.push((method, path.to_owned(), handler));
        Ok(())
    }

    /// The handler of the route matching `method path`, if any.
    pub fn find(&self, method: &str, path: &str) -> Option<RouteHandler> {
        self.routes
            .iter()
            .find(|(m, p, _)| m.eq_ignore_ascii_case(method) && p == path)
            .map(|(_, _, handler)| Arc::clone(handler))
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(_: HttpRequest) -> std::future::Ready<HttpResponse> {
        std::future::ready(HttpResponse {
            status: 200,
            headers: Vec::new(),
            body: Vec::new(),
        })
    }

    #[test]
    fn routes_match_exactly_and_reserved_paths_are_refused() {
        let mut routes = Routes::default();
        routes.add("get", "/status", ok).unwrap();
        assert!(routes.find("GET", "/status").is_some());
        assert!(routes.find("POST", "/status").is_none());
        assert!(routes.find("GET", "/status/x").is_none());
        for (method, path) in [("GET", "status"), ("POST", "/enable"), ("GET", "/status")] {
            assert_eq!(
                routes.add(method, path, ok).unwrap_err().kind,
                "ConfigError",
                "{method} {path}"
            );
        }
    }
}
