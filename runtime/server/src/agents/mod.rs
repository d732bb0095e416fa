//! Agent profiles and the agent store (bundles that install as profiles).

pub mod bundle;
pub mod profiles;
pub mod store;
