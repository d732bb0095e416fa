//! Agent profiles and the agent store (bundles that install as profiles).

pub mod bundle;
pub mod profiles;
pub mod references;
pub mod schemas;
pub mod store;
pub mod tool_names;
