//! HTTP routes an adapter serves under `/api/adapters/<name>/`: native adapters mount them in
//! `bind`, components declare them in `describe()`. Both go through [`Route::parse`], so the
//! same shapes are allowed and a request reaches an adapter only on a route it declared.
//!
//! The request and response are plain records, the same as the WIT world's, so neither the
//! contract nor an adapter needs an HTTP framework.

use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use crate::error::AdapterError;

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

/// Methods a route may have.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
/// First path segments the host keeps for itself under every adapter's prefix.
pub const HOST_SEGMENTS: &[&str] = &["enable", "disable", "recordings", "shadow"];
/// The longest route path.
pub const MAX_PATH_CHARS: usize = 200;
/// The most routes one adapter may serve.
pub const MAX_ROUTES: usize = 64;

/// One route: a method and a path relative to `/api/adapters/<name>`. A path ending in `/*`
/// also serves every path below that prefix (`/calls/*` serves `/calls/CA1/status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub method: String,
    pub path: String,
}

impl Route {
    /// A checked route: a known method; a path of `/`-separated segments of letters, digits
    /// and `-._~`, no `.` or `..` segment, at most [`MAX_PATH_CHARS`], not under a host
    /// path (`/enable`, `/disable`, `/recordings`, `/shadow`).
    pub fn parse(method: &str, path: &str) -> Result<Self, AdapterError> {
        let method = method.to_ascii_uppercase();
        let refuse = |why: &str| {
            Err(AdapterError::config(format!(
                "route {method} {path:?} is not allowed: {why}"
            )))
        };
        if !METHODS.contains(&method.as_str()) {
            return refuse(&format!("the method must be one of {}", METHODS.join(", ")));
        }
        let Some(rest) = path.strip_prefix('/') else {
            return refuse("a path starts with /");
        };
        if path.len() > MAX_PATH_CHARS {
            return refuse(&format!("paths are at most {MAX_PATH_CHARS} characters"));
        }
        let segments: Vec<&str> = rest.split('/').collect();
        let last = segments.len() - 1;
        for (i, segment) in segments.iter().enumerate() {
            let fine = match *segment {
                "" => rest.is_empty(),
                "." | ".." => false,
                "*" => i == last && i > 0,
                s => s
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c)),
            };
            if !fine {
                return refuse(
                    "segments are letters, digits and -._~ (no empty, . or .. segment; * only last)",
                );
            }
        }
        if HOST_SEGMENTS.contains(&segments[0]) {
            return refuse("/enable, /disable, /recordings and /shadow belong to the host");
        }
        Ok(Self {
            method,
            path: path.to_owned(),
        })
    }

    /// Whether a request's method and path fall on this route.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        self.method.eq_ignore_ascii_case(method) && self.covers(path)
    }

    /// Whether a request's path falls on this route, whatever its method.
    pub fn covers(&self, path: &str) -> bool {
        match self.path.strip_suffix('*') {
            Some(prefix) => path.len() > prefix.len() && path.starts_with(prefix),
            None => self.path == path,
        }
    }
}

/// Checks a whole route list: each route, no duplicates, at most [`MAX_ROUTES`].
pub fn parse_all<'a>(
    routes: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<Route>, AdapterError> {
    let mut out: Vec<Route> = Vec::new();
    for (method, path) in routes {
        if out.len() == MAX_ROUTES {
            return Err(AdapterError::config(format!(
                "at most {MAX_ROUTES} routes per adapter"
            )));
        }
        let route = Route::parse(method, path)?;
        if out.contains(&route) {
            return Err(AdapterError::config(format!(
                "route {} {} is declared twice",
                route.method, route.path
            )));
        }
        out.push(route);
    }
    Ok(out)
}

pub type RouteHandler = Arc<dyn Fn(HttpRequest) -> BoxFuture<'static, HttpResponse> + Send + Sync>;

/// The routes a native adapter mounts, with their handlers.
#[derive(Default)]
pub struct Routes {
    routes: Vec<(Route, RouteHandler)>,
}

impl Routes {
    /// Serves `method path` (see [`Route::parse`] for the allowed shapes).
    pub fn add<F, Fut>(&mut self, method: &str, path: &str, handler: F) -> Result<(), AdapterError>
    where
        F: Fn(HttpRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HttpResponse> + Send + 'static,
    {
        let mut declared: Vec<(&str, &str)> = self
            .routes
            .iter()
            .map(|(r, _)| (r.method.as_str(), r.path.as_str()))
            .collect();
        declared.push((method, path));
        let route = parse_all(declared)?.pop().expect("the new route is last");
        let handler: RouteHandler = Arc::new(move |request| handler(request).boxed());
        self.routes.push((route, handler));
        Ok(())
    }

    /// The handler of the route matching `method path`, if any.
    /// The routes, without their handlers.
    pub fn declared(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter().map(|(route, _)| route)
    }

    pub fn find(&self, method: &str, path: &str) -> Option<RouteHandler> {
        self.routes
            .iter()
            .find(|(route, _)| route.matches(method, path))
            .map(|(_, handler)| Arc::clone(handler))
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
    fn routes_match_exactly_or_below_a_wildcard() {
        let mut routes = Routes::default();
        routes.add("get", "/status", ok).unwrap();
        routes.add("POST", "/calls/*", ok).unwrap();
        assert!(routes.find("GET", "/status").is_some());
        assert!(routes.find("POST", "/status").is_none());
        assert!(routes.find("GET", "/status/x").is_none());
        assert!(routes.find("POST", "/calls/CA1/status").is_some());
        assert!(routes.find("POST", "/calls/").is_none());
        assert!(routes.find("POST", "/calls").is_none());
    }

    #[test]
    fn bad_shapes_duplicates_and_host_paths_are_refused() {
        let mut routes = Routes::default();
        routes.add("GET", "/status", ok).unwrap();
        for (method, path) in [
            ("GET", "status"),
            ("POST", "/enable"),
            ("POST", "/enable/"),
            ("GET", "/disable/x"),
            ("GET", "/status"),
            ("GET", "/../../health"),
            ("GET", "/a/./b"),
            ("GET", "/a//b"),
            ("GET", "/a/*/b"),
            ("GET", "/*"),
            ("GET", "/a b"),
            ("GET", "/caf\u{e9}"),
            ("BREW", "/pot"),
        ] {
            assert_eq!(
                routes.add(method, path, ok).unwrap_err().kind,
                "ConfigError",
                "{method} {path}"
            );
        }
        assert!(Route::parse("GET", "/").is_ok(), "the adapter's root");
        let long = format!("/{}", "a".repeat(MAX_PATH_CHARS));
        assert!(Route::parse("GET", &long).is_err());
        let many = (0..=MAX_ROUTES)
            .map(|i| format!("/r{i}"))
            .collect::<Vec<_>>();
        let error = parse_all(many.iter().map(|p| ("GET", p.as_str()))).unwrap_err();
        assert!(error.message.contains("at most 64 routes"), "{error}");
    }
}
