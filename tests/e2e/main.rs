//! Black-box tests: each starts the real `service-runtime` binary on a free port with its own
//! data directory and talks to it over HTTP, like a user or the dashboard would.

mod a2a;
mod a2a_client;
mod access;
mod adapters_list;
mod adapters_new;
mod agents;
mod approvals;
mod backup;
mod browser;
mod calendar;
mod chat;
mod conversations;
mod email;
mod fakes;
mod guards;
mod guests;
// The adapter's own tests use more of the fake than these do.
#[allow(dead_code, unused_imports)]
#[path = "../../builtin-adapters/guildchat/tests/platform/mod.rs"]
mod guild_platform;
mod guildchat_approvals;
mod hygiene;
mod integrations;
mod isolation;
mod javascript;
mod mail_servers;
mod mcp;
mod netns;
mod observability;
mod openapi;
mod people;
mod python;
mod radicale;
mod recordings;
mod replicas;
mod retention;
mod reuse;
mod runs;
mod scheduler;
mod server;
mod shadows;
mod single_sign_on;
mod spec;
mod support;
mod teamchat;
mod teamchat_approvals;
mod tools;
mod traces;
mod voice;
mod wasi_http;
mod wasm;
mod webhook;
