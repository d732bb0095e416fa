//! The Model Context Protocol, both ways: tools of configured MCP servers offered to agents
//! (`servers`, over `connection`s to guarded `process`es or Streamable HTTP), and this
//! runtime's agents served to MCP clients (`agents`), over `/mcp` and `service-runtime mcp`;
//! clients' server lists read into `config.toml` (`import`).

pub mod agents;
mod connection;
pub mod import;
pub mod process;
pub mod servers;
pub mod settings;
pub(crate) mod tools;

pub use agents::Agents;
pub use servers::McpServers;
