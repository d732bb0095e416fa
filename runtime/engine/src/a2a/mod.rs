//! Agents of other frameworks called over the Agent2Agent protocol (A2A 1.x, its JSON-RPC
//! binding): each configured remote agent's `card` read, its skills offered to agents here as
//! tools (`remote`), each call one message whose task is followed to its end (`client`).
//! This runtime's own agents are served over A2A by the server's `/a2a` routes.

mod card;
mod client;
pub mod remote;
pub mod settings;

pub use remote::RemoteAgents;
