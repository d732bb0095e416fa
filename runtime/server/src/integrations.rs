//! Integrations: the outside services the runtime talks to, whether their settings are
//! present, and a cheap live probe for those that have one. Secret values never leave this
//! module except as request headers to the service they belong to.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Method;
use serde::Serialize;

use crate::db::{self, Conn};
use crate::error::Result;
use crate::params;
use crate::settings_store::SettingsStore;

pub struct Integration {
    pub id: &'static str,
    pub name: &'static str,
    /// Every variable that belongs to this integration (the key-write endpoint accepts these).
    pub env_vars: &'static [&'static str],
    configured_by: Needs,
    probe: Option<Probe>,
}

/// Which variables make an integration count as configured.
enum Needs {
    All(&'static [&'static str]),
    Any(&'static [&'static str]),
}

/// One HTTP request that succeeds only with working settings.
struct Probe {
    method: Method,
    base_var: &'static str,
    default_base: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, HeaderValue)],
    /// The answer is JSON whose `ok` field must be true (the team-chat Web API style).
    ok_field: bool,
}

enum HeaderValue {
    Literal(&'static str),
    /// `prefix` + the variable's value; the header is left out when the variable is unset.
    Secret {
        var: &'static str,
        prefix: &'static str,
    },
}

/// Variables that take one of a few values: the key write refuses others, and the dashboard
/// offers them to pick from.
pub const CHOICES: &[(&str, &[&str])] = &[(
    crate::engine::settings::PROVIDER_VARIABLE,
    &["openai", "anthropic", "ollama", "offline"],
)];

/// The values `variable` may take, when it is one of [`CHOICES`].
pub fn choices(variable: &str) -> Option<&'static [&'static str]> {
    CHOICES
        .iter()
        .find(|(name, _)| *name == variable)
        .map(|(_, values)| *values)
}

pub const CATALOG: &[Integration] = &[
    Integration {
        id: "provider",
        name: "Model provider",
        env_vars: &[
            crate::engine::settings::PROVIDER_VARIABLE,
            crate::engine::settings::MODEL_VARIABLE,
        ],
        configured_by: Needs::Any(&[crate::engine::settings::PROVIDER_VARIABLE]),
        probe: None,
    },
    Integration {
        id: "openai",
        name: "OpenAI-compatible API",
        env_vars: &["OPENAI_API_KEY", "SERVICE_OPENAI_BASE_URL"],
        configured_by: Needs::Any(&["OPENAI_API_KEY", "SERVICE_OPENAI_BASE_URL"]),
        probe: Some(Probe {
            method: Method::GET,
            base_var: "SERVICE_OPENAI_BASE_URL",
            default_base: "https://api.openai.com/v1",
            path: "/models",
            headers: &[(
                "authorization",
                HeaderValue::Secret {
                    var: "OPENAI_API_KEY",
                    prefix: "Bearer ",
                },
            )],
            ok_field: false,
        }),
    },
    Integration {
        id: "anthropic",
        name: "Anthropic",
        env_vars: &["ANTHROPIC_API_KEY", "SERVICE_ANTHROPIC_BASE_URL"],
        configured_by: Needs::All(&["ANTHROPIC_API_KEY"]),
        probe: Some(Probe {
            method: Method::GET,
            base_var: "SERVICE_ANTHROPIC_BASE_URL",
            default_base: "https://api.anthropic.com",
            path: "/v1/models",
            headers: &[
                (
                    "x-api-key",
                    HeaderValue::Secret {
                        var: "ANTHROPIC_API_KEY",
                        prefix: "",
                    },
                ),
                ("anthropic-version", HeaderValue::Literal("2023-06-01")),
            ],
            ok_field: false,
        }),
    },
    Integration {
        id: "ollama",
        name: "Ollama",
        env_vars: &["SERVICE_OLLAMA_URL"],
        configured_by: Needs::All(&["SERVICE_OLLAMA_URL"]),
        probe: Some(Probe {
            method: Method::GET,
            base_var: "SERVICE_OLLAMA_URL",
            default_base: "http://127.0.0.1:11434/v1",
            path: "/models",
            headers: &[],
            ok_field: false,
        }),
    },
    Integration {
        id: "teamchat",
        name: "Teamchat",
        env_vars: &[
            "SERVICE_TEAMCHAT_BOT_TOKEN",
            "SERVICE_TEAMCHAT_SIGNING_SECRET",
            "SERVICE_TEAMCHAT_AGENT_PROFILE",
            "SERVICE_TEAMCHAT_API_BASE",
            "SERVICE_TEAMCHAT_HOOKS_BASE",
            "SERVICE_TEAMCHAT_CONTEXT_MESSAGES",
            "SERVICE_TEAMCHAT_APPROVERS",
        ],
        configured_by: Needs::All(&[
            "SERVICE_TEAMCHAT_BOT_TOKEN",
            "SERVICE_TEAMCHAT_SIGNING_SECRET",
        ]),
        probe: Some(Probe {
            method: Method::POST,
            base_var: "SERVICE_TEAMCHAT_API_BASE",
            default_base: "https://slack.com/api",
            path: "/auth.test",
            headers: &[(
                "authorization",
                HeaderValue::Secret {
                    var: "SERVICE_TEAMCHAT_BOT_TOKEN",
                    prefix: "Bearer ",
                },
            )],
            ok_field: true,
        }),
    },
    Integration {
        id: "guildchat",
        name: "Guildchat",
        env_vars: &[
            "SERVICE_GUILDCHAT_TOKEN",
            "SERVICE_GUILDCHAT_GUILD_ID",
            "SERVICE_GUILDCHAT_ADMIN_ROLE_ID",
            "SERVICE_GUILDCHAT_CATEGORY",
            "SERVICE_GUILDCHAT_AGENT_PROFILE",
            "SERVICE_GUILDCHAT_API_BASE",
            "SERVICE_GUILDCHAT_APPROVERS",
        ],
        configured_by: Needs::All(&["SERVICE_GUILDCHAT_TOKEN"]),
        probe: Some(Probe {
            method: Method::GET,
            base_var: "SERVICE_GUILDCHAT_API_BASE",
            default_base: "https://discord.com/api/v10",
            path: "/users/@me",
            headers: &[(
                "authorization",
                HeaderValue::Secret {
                    var: "SERVICE_GUILDCHAT_TOKEN",
                    prefix: "Bot ",
                },
            )],
            ok_field: false,
        }),
    },
    Integration {
        id: "webhook",
        name: "Signed webhook",
        env_vars: &["SERVICE_WEBHOOK_SECRET"],
        configured_by: Needs::All(&["SERVICE_WEBHOOK_SECRET"]),
        probe: None,
    },
    Integration {
        id: "email",
        name: "Email (IMAP and SMTP)",
        env_vars: &service_email::config::SETTINGS,
        configured_by: Needs::All(&[
            service_email::config::IMAP_HOST,
            service_email::config::SMTP_HOST,
            service_email::config::USERNAME,
            service_email::config::PASSWORD,
        ]),
        probe: None,
    },
    Integration {
        id: "calendar",
        name: "Calendar (CalDAV or Google)",
        env_vars: &[
            "SERVICE_CALENDAR_CALDAV_URL",
            "SERVICE_CALENDAR_CALDAV_USER",
            "SERVICE_CALENDAR_CALDAV_PASSWORD",
            "SERVICE_CALENDAR_GOOGLE_CLIENT_ID",
            "SERVICE_CALENDAR_GOOGLE_CLIENT_SECRET",
            "SERVICE_CALENDAR_GOOGLE_REFRESH_TOKEN",
            "SERVICE_CALENDAR_GOOGLE_API_BASE",
            "SERVICE_CALENDAR_GOOGLE_TOKEN_URL",
            "SERVICE_CALENDAR_DEFAULT",
            "SERVICE_CALENDAR_WRITE_ALLOWED",
        ],
        configured_by: Needs::Any(&[
            "SERVICE_CALENDAR_CALDAV_URL",
            "SERVICE_CALENDAR_GOOGLE_REFRESH_TOKEN",
        ]),
        probe: None,
    },
    Integration {
        id: "voice",
        name: "Voice calls (Twilio-compatible)",
        env_vars: &[
            "SERVICE_VOICE_TWILIO_ACCOUNT_SID",
            "SERVICE_VOICE_TWILIO_AUTH_TOKEN",
            "SERVICE_VOICE_TWILIO_FROM_NUMBER",
            "SERVICE_VOICE_PUBLIC_BASE_URL",
            "SERVICE_VOICE_CALLS_ALLOWED",
            "SERVICE_VOICE_TWILIO_API_BASE",
            "SERVICE_VOICE_AGENT_PROFILE",
        ],
        configured_by: Needs::All(&[
            "SERVICE_VOICE_TWILIO_ACCOUNT_SID",
            "SERVICE_VOICE_TWILIO_AUTH_TOKEN",
            "SERVICE_VOICE_TWILIO_FROM_NUMBER",
            "SERVICE_VOICE_PUBLIC_BASE_URL",
        ]),
        probe: None,
    },
    Integration {
        id: "github",
        name: "GitHub",
        env_vars: &["GITHUB_TOKEN", "SERVICE_GITHUB_API_BASE"],
        configured_by: Needs::All(&["GITHUB_TOKEN"]),
        probe: Some(Probe {
            method: Method::GET,
            base_var: "SERVICE_GITHUB_API_BASE",
            default_base: "https://api.github.com",
            path: "/rate_limit",
            headers: &[
                (
                    "authorization",
                    HeaderValue::Secret {
                        var: "GITHUB_TOKEN",
                        prefix: "Bearer ",
                    },
                ),
                (
                    "accept",
                    HeaderValue::Literal("application/vnd.github+json"),
                ),
            ],
            ok_field: false,
        }),
    },
    Integration {
        id: "web_search",
        name: "Web search (Brave)",
        env_vars: &["BRAVE_SEARCH_API_KEY"],
        configured_by: Needs::All(&["BRAVE_SEARCH_API_KEY"]),
        probe: None,
    },
    Integration {
        id: "metrics",
        name: "Prometheus scrapers from other machines",
        env_vars: &[crate::http::metrics::TOKEN_VARIABLE],
        configured_by: Needs::All(&[crate::http::metrics::TOKEN_VARIABLE]),
        probe: None,
    },
    Integration {
        id: "mcp",
        name: "MCP clients from other machines",
        env_vars: &[crate::http::mcp::TOKEN_VARIABLE],
        configured_by: Needs::All(&[crate::http::mcp::TOKEN_VARIABLE]),
        probe: None,
    },
];

pub fn find(id: &str) -> Option<&'static Integration> {
    CATALOG.iter().find(|i| i.id == id)
}

/// What the listing shows of one integration: never a value, only whether it is set.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = IntegrationStatus)]
pub struct Status {
    pub id: &'static str,
    pub name: &'static str,
    #[schema(value_type = Vec<String>)]
    pub env_vars: &'static [&'static str],
    pub configured: bool,
    /// Which of its variables are set (never their values).
    #[schema(value_type = BTreeMap<String, bool>)]
    pub set: BTreeMap<&'static str, bool>,
    /// The values those of its variables that take one of a few may take.
    #[schema(value_type = BTreeMap<String, Vec<String>>)]
    pub choices: BTreeMap<&'static str, &'static [&'static str]>,
    /// Whether it has a live probe (`verify`).
    pub verifiable: bool,
    /// Outcome of the last probe; `None` when never probed since its settings last changed.
    pub verified: Option<bool>,
}

/// Outcome of a probe, as the verify endpoint answers it.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Integration {
    pub fn is_configured(&self, env: &SettingsStore) -> bool {
        match self.configured_by {
            Needs::All(vars) => vars.iter().all(|v| env.is_set(v)),
            Needs::Any(vars) => vars.iter().any(|v| env.is_set(v)),
        }
    }

    pub fn has_probe(&self) -> bool {
        self.probe.is_some()
    }

    /// The URL the probe asks, from the settings as they are now.
    pub fn probe_url(&self, env: &SettingsStore) -> Option<String> {
        let probe = self.probe.as_ref()?;
        let base = env
            .get(probe.base_var)
            .unwrap_or_else(|| probe.default_base.to_owned());
        Some(format!("{}{}", base.trim_end_matches('/'), probe.path))
    }

    /// Runs the live probe. Failures name the HTTP status or the transport problem, never the
    /// response body, which some services use to echo part of a rejected key.
    pub async fn probe(&self, env: &SettingsStore, client: &reqwest::Client) -> Verification {
        let Some(probe) = &self.probe else {
            return Verification::failed("no probe");
        };
        if !self.is_configured(env) {
            return Verification::failed(format!("{} is not configured", self.name));
        }
        let url = self.probe_url(env).unwrap_or_default();
        let mut request = client
            .request(probe.method.clone(), &url)
            .timeout(Duration::from_secs(10));
        for (name, value) in probe.headers {
            match value {
                HeaderValue::Literal(v) => request = request.header(*name, *v),
                HeaderValue::Secret { var, prefix } => {
                    if let Some(secret) = env.get(var) {
                        request = request.header(*name, format!("{prefix}{secret}"));
                    }
                }
            }
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return Verification::failed(format!("request failed: {}", e.without_url())),
        };
        let status = response.status();
        if !status.is_success() {
            return Verification::failed(format!("HTTP {status}"));
        }
        if probe.ok_field {
            let body: serde_json::Value = match response.json().await {
                Ok(body) => body,
                Err(_) => return Verification::failed("the answer was not JSON"),
            };
            if body["ok"] != true {
                // The Web API's `error` is a fixed code such as `invalid_auth`, safe to show.
                let code = body["error"].as_str().unwrap_or("unknown error");
                return Verification::failed(format!("the API answered ok=false: {code}"));
            }
        }
        Verification {
            ok: true,
            error: None,
        }
    }
}

impl Verification {
    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            ok: false,
            error: Some(message.into()),
        }
    }
}

/// Every integration with its state.
pub fn statuses(conn: &Conn, env: &SettingsStore) -> Result<Vec<Status>> {
    CATALOG
        .iter()
        .map(|i| {
            Ok(Status {
                id: i.id,
                name: i.name,
                env_vars: i.env_vars,
                configured: i.is_configured(env),
                set: i.env_vars.iter().map(|v| (*v, env.is_set(v))).collect(),
                choices: i
                    .env_vars
                    .iter()
                    .filter_map(|v| Some((*v, choices(v)?)))
                    .collect(),
                verifiable: i.has_probe(),
                verified: last_verification(conn, i.id)?,
            })
        })
        .collect()
}

fn last_verification(conn: &Conn, id: &str) -> Result<Option<bool>> {
    conn.query_opt(
        "SELECT ok FROM integration_verifications WHERE integration = ?1",
        params![id],
        |row| row.get(0),
    )
}

pub fn record_verification(conn: &Conn, id: &str, outcome: &Verification) -> Result<()> {
    conn.execute(
        "INSERT INTO integration_verifications (integration, ok, error, verified_at) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT (integration) DO UPDATE SET \
         ok = excluded.ok, error = excluded.error, verified_at = excluded.verified_at",
        params![id, outcome.ok, outcome.error, db::now()],
    )?;
    Ok(())
}

/// Settings changed: the last probe no longer says anything about them.
pub fn forget_verification(conn: &Conn, id: &str) -> Result<()> {
    conn.execute(
        "DELETE FROM integration_verifications WHERE integration = ?1",
        params![id],
    )?;
    Ok(())
}
