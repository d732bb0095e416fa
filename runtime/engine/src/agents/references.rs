//! Who names a profile: schedules (by `agent_profile_name`) and adapters (by their
//! `SERVICE_<ADAPTER>_AGENT_PROFILE` variable). Deleting a profile leaves them as they are;
//! they then follow the rule for a missing profile (a schedule's run fails with an error
//! trace, an adapter answers with the server's defaults), so the API says who they are.

use crate::db::Conn;
use serde::Serialize;

use crate::error::Result;
use crate::scheduler::store as schedules;
use crate::settings_store::SettingsStore;

const VARIABLE_PREFIX: &str = "SERVICE_";
const VARIABLE_SUFFIX: &str = "_AGENT_PROFILE";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct References {
    /// Names of the schedules that run the profile.
    pub schedules: Vec<String>,
    pub adapters: Vec<AdapterReference>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct AdapterReference {
    /// `teamchat` for `SERVICE_TEAMCHAT_AGENT_PROFILE`.
    pub adapter: String,
    pub variable: String,
}

impl References {
    pub fn is_empty(&self) -> bool {
        self.schedules.is_empty() && self.adapters.is_empty()
    }
}

pub fn find(conn: &Conn, env: &SettingsStore, profile: &str) -> Result<References> {
    let adapters = env
        .matching(VARIABLE_PREFIX, VARIABLE_SUFFIX)
        .into_iter()
        .filter(|(_, value)| value == profile)
        .filter_map(|(variable, _)| {
            let adapter = variable
                .strip_prefix(VARIABLE_PREFIX)?
                .strip_suffix(VARIABLE_SUFFIX)?
                .to_ascii_lowercase();
            (!adapter.is_empty()).then_some(AdapterReference { adapter, variable })
        })
        .collect();
    Ok(References {
        schedules: schedules::naming_profile(conn, profile)?,
        adapters,
    })
}
