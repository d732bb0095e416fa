//! The one place a route is added, with the permission its caller needs: the check runs as
//! the route's own layer, and the list of declarations is what the documentation and the
//! tests walk.

use std::convert::Infallible;

use axum::Router;
use axum::extract::Request;
use axum::handler::Handler;
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::{MethodFilter, MethodRouter, on};
use tower::Service;

use super::AppState;
use super::identity::require;
use super::run_budget;
use crate::access::Permission;

/// A route's method, path and permission.
#[derive(Debug, Clone)]
pub struct Declared {
    /// `GET`, `POST`, ... or `ANY`.
    pub method: &'static str,
    pub path: String,
    pub permission: Permission,
}

#[derive(Default)]
pub struct Routes {
    router: Router<AppState>,
    declared: Vec<Declared>,
}

impl Routes {
    pub fn get<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &str,
        permission: Permission,
        handler: H,
    ) -> Self {
        self.add("GET", MethodFilter::GET, path, permission, handler)
    }

    pub fn post<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &str,
        permission: Permission,
        handler: H,
    ) -> Self {
        self.add("POST", MethodFilter::POST, path, permission, handler)
    }

    /// A POST that starts agent runs: the caller's permission is checked first, then their run
    /// budget is spent (`run_budget`).
    pub fn post_run<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &str,
        permission: Permission,
        handler: H,
        state: &AppState,
    ) -> Self {
        let route = on(MethodFilter::POST, handler).route_layer(middleware::from_fn_with_state(
            state.clone(),
            run_budget::spend,
        ));
        self.add_route("POST", path, permission, route)
    }

    pub fn patch<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &str,
        permission: Permission,
        handler: H,
    ) -> Self {
        self.add("PATCH", MethodFilter::PATCH, path, permission, handler)
    }

    pub fn delete<H: Handler<T, AppState>, T: 'static>(
        self,
        path: &str,
        permission: Permission,
        handler: H,
    ) -> Self {
        self.add("DELETE", MethodFilter::DELETE, path, permission, handler)
    }

    /// Every method (adapters' platform routes).
    pub fn any<H: Handler<T, AppState>, T: 'static>(
        mut self,
        path: &str,
        permission: Permission,
        handler: H,
    ) -> Self {
        // `any` routes through the method router's fallback, which only `layer` wraps.
        let route = axum::routing::any(handler).layer(middleware::from_fn(move |request, next| {
            require(permission, request, next)
        }));
        self.router = self.router.route(path, route);
        self.declare("ANY", path, permission)
    }

    /// A whole service under `path` (every method).
    pub fn service<S>(mut self, path: &str, permission: Permission, service: S) -> Self
    where
        S: Service<Request, Error = Infallible> + Clone + Send + Sync + 'static,
        S::Response: IntoResponse,
        S::Future: Send + 'static,
    {
        let nested = Router::new()
            .nest_service(path, service)
            .layer(middleware::from_fn(move |request, next| {
                require(permission, request, next)
            }));
        self.router = self.router.merge(nested);
        self.declare("ANY", path, permission)
    }

    /// `routes` under `prefix`.
    pub fn nest(mut self, prefix: &str, routes: Routes) -> Self {
        self.router = self.router.nest(prefix, routes.router);
        self.declared
            .extend(routes.declared.into_iter().map(|declared| Declared {
                path: format!("{prefix}{}", declared.path),
                ..declared
            }));
        self
    }

    /// Changes the router under the declarations (layers, fallbacks), never its routes.
    pub fn map(mut self, change: impl FnOnce(Router<AppState>) -> Router<AppState>) -> Self {
        self.router = change(self.router);
        self
    }

    pub fn into_parts(self) -> (Router<AppState>, Vec<Declared>) {
        (self.router, self.declared)
    }

    fn add<H: Handler<T, AppState>, T: 'static>(
        self,
        method: &'static str,
        filter: MethodFilter,
        path: &str,
        permission: Permission,
        handler: H,
    ) -> Self {
        self.add_route(method, path, permission, on(filter, handler))
    }

    fn add_route(
        mut self,
        method: &'static str,
        path: &str,
        permission: Permission,
        route: MethodRouter<AppState>,
    ) -> Self {
        self.router = self.router.route(path, guarded(route, permission));
        self.declare(method, path, permission)
    }

    fn declare(mut self, method: &'static str, path: &str, permission: Permission) -> Self {
        self.declared.push(Declared {
            method,
            path: path.to_owned(),
            permission,
        });
        self
    }
}

fn guarded(route: MethodRouter<AppState>, permission: Permission) -> MethodRouter<AppState> {
    route.route_layer(middleware::from_fn(move |request, next| {
        require(permission, request, next)
    }))
}
