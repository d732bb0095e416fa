//! Settings from the environment (spec 4.3). The token is required. The control bot needs a
//! numeric guild id and admin role id; without them it stays offline (and `/service-setup` is
//! denied to everyone) while mentions and direct messages keep working.

pub const TOKEN: &str = "SERVICE_GUILDCHAT_TOKEN";
pub const GUILD_ID: &str = "SERVICE_GUILDCHAT_GUILD_ID";
pub const ADMIN_ROLE_ID: &str = "SERVICE_GUILDCHAT_ADMIN_ROLE_ID";
pub const CATEGORY: &str = "SERVICE_GUILDCHAT_CATEGORY";
pub const AGENT_PROFILE: &str = "SERVICE_GUILDCHAT_AGENT_PROFILE";
/// Where REST calls go instead of the platform's own API: a proxy, or a fake in tests.
pub const API_BASE: &str = "SERVICE_GUILDCHAT_API_BASE";
/// User ids who may approve tool calls besides the person who asked.
pub const APPROVERS: &str = "SERVICE_GUILDCHAT_APPROVERS";

use service_contract::{ConfigProblem, Missing};

/// Every setting: the host restarts the adapter when one is written.
pub const SETTINGS: [&str; 7] = [
    TOKEN,
    GUILD_ID,
    ADMIN_ROLE_ID,
    CATEGORY,
    AGENT_PROFILE,
    API_BASE,
    APPROVERS,
];

const DEFAULT_CATEGORY: &str = "service";
const DEFAULT_PROFILE: &str = "default";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub token: String,
    /// Scheme and host (optionally a path prefix) that replace the platform's API origin.
    pub api_base: Option<String>,
    /// The one profile that answers every message (spec 4.3 rule 5).
    pub profile: String,
    /// The control bot's settings, or why it is offline.
    pub control: Result<Control, String>,
    /// Who may approve any tool call asked about here, besides the person who asked (ids that
    /// are not numbers are left out).
    pub approvers: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    pub guild_id: u64,
    pub admin_role_id: u64,
    pub category: String,
}

impl Config {
    /// Reads the settings through `get` (unset and empty are both `None`). `Err` is a problem
    /// that keeps the whole adapter offline.
    pub fn from_secrets(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigProblem> {
        let token = get(TOKEN)
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ConfigProblem::Missing(Missing::All(vec![TOKEN.to_owned()])))?;
        let api_base = get(API_BASE)
            .map(|base| api_base(&base))
            .transpose()
            .map_err(ConfigProblem::Invalid)?;
        Ok(Self {
            token,
            api_base,
            // Exact match: profile names are not trimmed or case-folded.
            profile: get(AGENT_PROFILE).unwrap_or_else(|| DEFAULT_PROFILE.to_owned()),
            control: control(&get),
            approvers: get(APPROVERS)
                .unwrap_or_default()
                .split([',', ' '])
                .filter_map(|id| id.trim().parse().ok())
                .collect(),
        })
    }
}

fn api_base(value: &str) -> Result<String, String> {
    let base = value.trim().trim_end_matches('/');
    if base.starts_with("http://") || base.starts_with("https://") {
        Ok(base.to_owned())
    } else {
        Err(format!(
            "{API_BASE} must be an http:// or https:// URL, got {value:?}"
        ))
    }
}

fn control(get: &impl Fn(&str) -> Option<String>) -> Result<Control, String> {
    match (
        id(GUILD_ID, get(GUILD_ID)),
        id(ADMIN_ROLE_ID, get(ADMIN_ROLE_ID)),
    ) {
        (Ok(guild_id), Ok(admin_role_id)) => Ok(Control {
            guild_id,
            admin_role_id,
            category: get(CATEGORY)
                .map(|c| c.trim().to_owned())
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| DEFAULT_CATEGORY.to_owned()),
        }),
        (guild, role) => {
            let problems: Vec<String> = [guild.err(), role.err()].into_iter().flatten().collect();
            Err(format!(
                "{}; the control bot is offline and /service-setup is denied to everyone \
                 (mentions and direct messages still work)",
                problems.join("; ")
            ))
        }
    }
}

/// A platform id: a positive whole number.
fn id(name: &str, value: Option<String>) -> Result<u64, String> {
    let value = value.ok_or_else(|| format!("{name} is not set"))?;
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|id| *id != 0)
        .ok_or_else(|| format!("{name} must be a numeric id, got {value:?}"))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn parse(vars: &[(&str, &str)]) -> Result<Config, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_secrets(|name| vars.get(name).cloned()).map_err(|p| p.to_string())
    }

    #[test]
    fn the_token_is_required() {
        assert_eq!(
            parse(&[]).unwrap_err(),
            "SERVICE_GUILDCHAT_TOKEN is not set"
        );
        assert_eq!(
            parse(&[(TOKEN, "  ")]).unwrap_err(),
            "SERVICE_GUILDCHAT_TOKEN is not set"
        );
    }

    #[test]
    fn defaults_apply_and_the_control_bot_needs_both_ids() {
        let config = parse(&[(TOKEN, " tok\n")]).unwrap();
        assert_eq!(config.token, "tok");
        assert_eq!(config.profile, "default");
        assert_eq!(config.api_base, None);
        let problem = config.control.unwrap_err();
        assert!(problem.starts_with(
            "SERVICE_GUILDCHAT_GUILD_ID is not set; SERVICE_GUILDCHAT_ADMIN_ROLE_ID is not set; \
             the control bot is offline"
        ));
        assert!(problem.contains("mentions and direct messages still work"));
    }

    #[test]
    fn a_non_numeric_admin_role_is_deny_all_with_an_error() {
        let config = parse(&[(TOKEN, "t"), (GUILD_ID, "42"), (ADMIN_ROLE_ID, "admins")]).unwrap();
        let problem = config.control.unwrap_err();
        assert!(problem.starts_with(
            "SERVICE_GUILDCHAT_ADMIN_ROLE_ID must be a numeric id, got \"admins\"; the control bot \
             is offline and /service-setup is denied to everyone"
        ));
        let zero = parse(&[(TOKEN, "t"), (GUILD_ID, "0"), (ADMIN_ROLE_ID, "7")]).unwrap();
        assert!(
            zero.control
                .unwrap_err()
                .contains("GUILD_ID must be a numeric id")
        );
    }

    #[test]
    fn a_full_configuration_enables_the_control_bot() {
        let config = parse(&[
            (TOKEN, "t"),
            (GUILD_ID, "42"),
            (ADMIN_ROLE_ID, " 7 "),
            (CATEGORY, "Ops"),
            (AGENT_PROFILE, "Helper Bot"),
            (API_BASE, "http://127.0.0.1:9/"),
        ])
        .unwrap();
        assert_eq!(
            config.control,
            Ok(Control {
                guild_id: 42,
                admin_role_id: 7,
                category: "Ops".to_owned()
            })
        );
        assert_eq!(config.profile, "Helper Bot");
        assert_eq!(config.api_base.as_deref(), Some("http://127.0.0.1:9"));
    }

    #[test]
    fn an_api_base_must_be_an_http_url() {
        let problem = parse(&[(TOKEN, "t"), (API_BASE, "127.0.0.1:9")]).unwrap_err();
        assert_eq!(
            problem,
            "SERVICE_GUILDCHAT_API_BASE must be an http:// or https:// URL, got \"127.0.0.1:9\""
        );
    }
}
