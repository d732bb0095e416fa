//! Who may run `/service-setup` (spec 5): members holding the admin role, in the configured
//! guild. Deny by default: with the control bot offline (a missing or non-numeric id) nobody may.

use crate::config::Control;

pub fn may_run_setup(control: Option<&Control>, guild_id: Option<u64>, roles: &[u64]) -> bool {
    control.is_some_and(|control| {
        guild_id == Some(control.guild_id) && roles.contains(&control.admin_role_id)
    })
}

/// The ephemeral answer to everyone else (spec 7).
pub const REFUSAL: &str = "You lack the required admin role to run /service-setup.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_admin_role_holders_in_the_guild_pass() {
        let control = Control {
            guild_id: 1,
            admin_role_id: 7,
            category: "service".to_owned(),
        };
        assert!(may_run_setup(Some(&control), Some(1), &[3, 7]));
        assert!(!may_run_setup(Some(&control), Some(1), &[3]));
        assert!(
            !may_run_setup(Some(&control), Some(2), &[7]),
            "another guild"
        );
        assert!(
            !may_run_setup(Some(&control), None, &[7]),
            "a direct message"
        );
        assert!(
            !may_run_setup(None, Some(1), &[7]),
            "control bot offline: deny all"
        );
    }
}
