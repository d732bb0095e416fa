//! A receiver of completion webhooks: records every delivery as it came (headers and raw
//! body, for a Standard Webhooks library to verify) and answers with the statuses it is told,
//! then with its default.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;

use crate::support::spawn_fake;

/// One delivery and the status it was answered.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub headers: HeaderMap,
    pub body: String,
    pub answered: u16,
}

#[derive(Default)]
struct Script {
    first: VecDeque<u16>,
    then: u16,
    seen: Vec<Delivery>,
}

pub struct Receiver {
    /// Where deliveries go (`.../hook`).
    pub url: String,
    script: Arc<Mutex<Script>>,
}

impl Receiver {
    /// Answers `first` in order, then `then`.
    pub async fn start(first: &[u16], then: u16) -> Self {
        let script = Arc::new(Mutex::new(Script {
            first: first.iter().copied().collect(),
            then,
            seen: Vec::new(),
        }));
        let router =
            Router::new()
                .route(
                    "/hook",
                    post(
                        |State(script): State<Arc<Mutex<Script>>>,
                         headers: HeaderMap,
                         body: String| async move {
                            let mut script = script.lock().unwrap();
                            let answered = script.first.pop_front().unwrap_or(script.then);
                            script.seen.push(Delivery {
                                headers,
                                body,
                                answered,
                            });
                            StatusCode::from_u16(answered).unwrap()
                        },
                    ),
                )
                .with_state(Arc::clone(&script));
        let url = format!("{}/hook", spawn_fake(router).await);
        Self { url, script }
    }

    /// From now on answers `status`.
    pub fn answer(&self, status: u16) {
        self.script.lock().unwrap().then = status;
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.script.lock().unwrap().seen.clone()
    }

    /// The deliveries it accepted (2xx).
    pub fn accepted(&self) -> Vec<Delivery> {
        let mut seen = self.deliveries();
        seen.retain(|d| (200..300).contains(&d.answered));
        seen
    }
}
