//! The fixed set of roles and what each may do. A role holds every permission of the roles
//! below it: viewer < member < operator < admin.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Member,
    Operator,
    Admin,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Admin, Role::Operator, Role::Member, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Member => "member",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// Reads a role's name as the API and the CLI take it; `field` names the input.
    pub fn parse(text: &str, field: &'static str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|role| role.as_str() == text)
            .ok_or_else(|| Error::InvalidField {
                field,
                message: format!(
                    "{field} must be one of admin, operator, member or viewer, got {text:?}"
                ),
            })
    }

    pub fn may(self, permission: Permission) -> bool {
        permission.least_role().is_none_or(|least| self >= least)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a route needs of its caller. Every route declares one where it is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Anyone, signed in or not: the liveness answer, the dashboard's files, adapters'
    /// platform routes (they check their platform's signature).
    Open,
    /// Reading how the service runs: adapters, tasks, traces, tools, schedules, settings'
    /// status (never a value), metrics.
    ReadStatus,
    /// Reading agents and the store.
    ReadAgents,
    /// Talking to agents.
    Chat,
    /// Creating, changing and deleting agents; installing bundles.
    ManageAgents,
    /// Creating, changing, running and deleting schedules.
    ManageSchedules,
    /// Every conversation and approval, deleting them and deciding approvals.
    ManageConversations,
    /// Cancelling and deleting tasks.
    CancelTasks,
    /// Turning adapters on and off.
    ManageAdapters,
    /// Writing keys and settings, probing integrations.
    ManageSettings,
    /// API tokens (and people).
    ManageAccess,
}

impl Permission {
    /// The least role that holds it; `None` for [`Permission::Open`].
    pub fn least_role(self) -> Option<Role> {
        use Permission::*;
        Some(match self {
            Open => return None,
            ReadStatus => Role::Viewer,
            ReadAgents | Chat => Role::Member,
            ManageAgents | ManageSchedules | ManageConversations | CancelTasks => Role::Operator,
            ManageAdapters | ManageSettings | ManageAccess => Role::Admin,
        })
    }

    pub fn as_str(self) -> &'static str {
        use Permission::*;
        match self {
            Open => "open",
            ReadStatus => "read_status",
            ReadAgents => "read_agents",
            Chat => "chat",
            ManageAgents => "manage_agents",
            ManageSchedules => "manage_schedules",
            ManageConversations => "manage_conversations",
            CancelTasks => "cancel_tasks",
            ManageAdapters => "manage_adapters",
            ManageSettings => "manage_settings",
            ManageAccess => "manage_access",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_holds_the_permissions_of_those_below() {
        assert!(Role::Admin.may(Permission::ManageAccess));
        assert!(!Role::Operator.may(Permission::ManageAccess));
        assert!(Role::Operator.may(Permission::CancelTasks));
        assert!(!Role::Member.may(Permission::ManageAgents));
        assert!(Role::Member.may(Permission::Chat));
        assert!(!Role::Viewer.may(Permission::Chat));
        assert!(Role::Viewer.may(Permission::ReadStatus));
        assert!(Role::Viewer.may(Permission::Open));
    }

    #[test]
    fn a_role_is_read_by_its_name_only() {
        assert_eq!(Role::parse("operator", "role").unwrap(), Role::Operator);
        let err = Role::parse("Admin", "role").unwrap_err().to_string();
        assert!(err.contains("admin, operator, member or viewer"), "{err}");
    }
}
