//! The fixed set of roles and what each may do. A role holds every permission of the roles
//! below it: viewer < member < operator < admin.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
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

    /// The names of the permissions it holds beyond `open`, for the dashboard to show only
    /// what the role may do.
    pub fn permissions(self) -> Vec<&'static str> {
        Permission::ALL
            .into_iter()
            .filter(|p| p.least_role().is_some() && self.may(*p))
            .map(Permission::as_str)
            .collect()
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may use an agent besides admins (`access` on its profile): principals holding one of
/// `roles`, or people in one of the identity provider's `groups`. An agent without it is open
/// to everyone who may chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentAccess {
    #[serde(default)]
    pub roles: Vec<Role>,
    #[serde(default)]
    pub groups: Vec<String>,
}

impl AgentAccess {
    /// Groups an agent names at most, and a group name's characters at most.
    pub(crate) const MAX_GROUPS: usize = 50;
    pub(crate) const MAX_GROUP_CHARS: usize = 200;

    pub fn check(&self) -> Result<()> {
        if self.roles.is_empty() && self.groups.is_empty() {
            return Err(Error::field(
                "access",
                "access needs at least one role or group (or null for everyone who may chat)",
            ));
        }
        let bad_group = |g: &String| {
            g.trim().is_empty() || g.chars().count() > Self::MAX_GROUP_CHARS || g.trim() != g
        };
        if self.groups.len() > Self::MAX_GROUPS || self.groups.iter().any(bad_group) {
            return Err(Error::field(
                "access",
                format!(
                    "access.groups holds at most {} names of 1 to {} characters without \
                     surrounding spaces",
                    Self::MAX_GROUPS,
                    Self::MAX_GROUP_CHARS
                ),
            ));
        }
        Ok(())
    }

    /// Whether a principal of `role` in `groups` may use the agent.
    pub(crate) fn admits(&self, role: Role, groups: &[String]) -> bool {
        role == Role::Admin
            || self.roles.contains(&role)
            || groups.iter().any(|group| self.groups.contains(group))
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
    pub const ALL: [Permission; 11] = {
        use Permission::*;
        [
            Open,
            ReadStatus,
            ReadAgents,
            Chat,
            ManageAgents,
            ManageSchedules,
            ManageConversations,
            CancelTasks,
            ManageAdapters,
            ManageSettings,
            ManageAccess,
        ]
    };

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
        assert_eq!(Role::Viewer.permissions(), ["read_status"]);
        assert_eq!(Role::Admin.permissions().len(), Permission::ALL.len() - 1);
    }

    #[test]
    fn an_agent_admits_admins_its_roles_and_its_groups() {
        let access = AgentAccess {
            roles: vec![Role::Operator],
            groups: vec!["sre".into()],
        };
        assert!(access.check().is_ok());
        assert!(access.admits(Role::Admin, &[]));
        assert!(access.admits(Role::Operator, &[]));
        assert!(!access.admits(Role::Member, &[]));
        assert!(access.admits(Role::Member, &["sre".into()]));
        let empty = AgentAccess {
            roles: vec![],
            groups: vec![],
        };
        assert!(empty.check().is_err());
        let padded = AgentAccess {
            roles: vec![],
            groups: vec![" sre".into()],
        };
        assert!(padded.check().is_err());
    }

    #[test]
    fn a_role_is_read_by_its_name_only() {
        assert_eq!(Role::parse("operator", "role").unwrap(), Role::Operator);
        let err = Role::parse("Admin", "role").unwrap_err().to_string();
        assert!(err.contains("admin, operator, member or viewer"), "{err}");
    }
}
