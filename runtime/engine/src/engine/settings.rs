//! Which provider and model agents run with, decided afresh for every run (so a choice saved
//! in Settings applies to the next run, on every replica, without a restart): `SERVICE_PROVIDER`
//! / `SERVICE_MODEL` (the process environment, which wins, or a value written through the API),
//! else `[provider] default` / `model` in config.toml, else the one provider whose settings
//! alone are set, else the offline responder. Credentials are read on every run too.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::provider::anthropic::Anthropic;
use super::provider::offline::{self, Offline};
use super::provider::openai::OpenAi;
use super::provider::{Provider, ProviderError};
use crate::config::ProviderSection;
use crate::settings_store::SettingsStore;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Anthropic,
    Ollama,
    Offline,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Ollama => "ollama",
            Self::Offline => offline::NAME,
        }
    }

    fn default_model(self) -> &'static str {
        match self {
            Self::OpenAi => "gpt-4o-mini",
            Self::Anthropic => "claude-sonnet-4-5",
            Self::Ollama => "llama3.2",
            Self::Offline => offline::MODEL,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Self::OpenAi, Self::Anthropic, Self::Ollama, Self::Offline]
            .into_iter()
            .find(|k| k.as_str() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                format!("unknown provider {s:?}; expected openai, anthropic, ollama or offline")
            })
    }
}

/// The variable that chooses the provider, and the one that chooses its model.
pub const PROVIDER_VARIABLE: &str = "SERVICE_PROVIDER";
pub const MODEL_VARIABLE: &str = "SERVICE_MODEL";

/// How agents' provider and model are chosen: config.toml's `[provider]`, under the settings.
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    file: ProviderSection,
}

/// What chose the provider of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChosenBy {
    /// `SERVICE_PROVIDER`, from the environment or Settings.
    Setting,
    /// `[provider] default` in config.toml.
    ConfigFile,
    /// The only provider whose settings are set.
    OnlyConfigured,
    /// Nothing: the offline responder.
    Nothing,
}

impl ChosenBy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Setting => "setting",
            Self::ConfigFile => "config_file",
            Self::OnlyConfigured => "only_configured",
            Self::Nothing => "nothing",
        }
    }
}

/// The provider and model runs use now.
#[derive(Debug, Clone)]
pub struct ProviderChoice {
    pub kind: ProviderKind,
    model: Option<String>,
    pub chosen_by: ChosenBy,
}

impl ProviderSettings {
    /// Checks the choice as it stands at start: a provider name that is not one is an error
    /// there (a value written later is checked when it is written).
    pub fn load(env: &SettingsStore, file: &ProviderSection) -> anyhow::Result<Self> {
        let settings = Self { file: file.clone() };
        settings.choice(env).map_err(anyhow::Error::msg)?;
        Ok(settings)
    }

    /// The provider and model chosen now.
    pub fn choice(&self, env: &SettingsStore) -> Result<ProviderChoice, String> {
        let (kind, chosen_by) = match env.get(PROVIDER_VARIABLE) {
            Some(name) => (name.parse()?, ChosenBy::Setting),
            None => match &self.file.default {
                Some(name) => (name.parse()?, ChosenBy::ConfigFile),
                None => match configured(env).as_slice() {
                    [only] => (*only, ChosenBy::OnlyConfigured),
                    _ => (ProviderKind::Offline, ChosenBy::Nothing),
                },
            },
        };
        let model = env.get(MODEL_VARIABLE).or_else(|| self.file.model.clone());
        Ok(ProviderChoice {
            kind,
            model,
            chosen_by,
        })
    }

    /// [`choice`](Self::choice), falling back to the offline responder when the setting
    /// names no provider (which the key write refuses; a hand-edited `.env` may not).
    pub fn current(&self, env: &SettingsStore) -> ProviderChoice {
        self.choice(env).unwrap_or_else(|e| {
            tracing::warn!("{e}; the offline responder answers");
            ProviderChoice {
                kind: ProviderKind::Offline,
                model: None,
                chosen_by: ChosenBy::Nothing,
            }
        })
    }
}

/// The providers whose settings are set (Ollama's URL counts: it needs no key).
pub fn configured(env: &SettingsStore) -> Vec<ProviderKind> {
    [
        (
            ProviderKind::OpenAi,
            &["OPENAI_API_KEY", "SERVICE_OPENAI_BASE_URL"][..],
        ),
        (ProviderKind::Anthropic, &["ANTHROPIC_API_KEY"][..]),
        (ProviderKind::Ollama, &["SERVICE_OLLAMA_URL"][..]),
    ]
    .into_iter()
    .filter(|(_, vars)| vars.iter().any(|v| env.is_set(v)))
    .map(|(kind, _)| kind)
    .collect()
}

impl ProviderChoice {
    /// The chosen model, else the provider's default.
    pub fn model(&self) -> &str {
        self.model.as_deref().unwrap_or(self.kind.default_model())
    }

    /// Builds the provider with the credentials set right now.
    pub fn provider(
        &self,
        env: &SettingsStore,
        http: &reqwest::Client,
    ) -> Result<Arc<dyn Provider>, ProviderError> {
        let http = http.clone();
        Ok(match self.kind {
            ProviderKind::OpenAi => {
                let key = env.get("OPENAI_API_KEY");
                let base = env.get("SERVICE_OPENAI_BASE_URL");
                if key.is_none() && base.is_none() {
                    return Err(ProviderError::NotConfigured {
                        provider: "openai",
                        hint: "set OPENAI_API_KEY, or SERVICE_OPENAI_BASE_URL for a local server"
                            .into(),
                    });
                }
                let base = base.unwrap_or_else(|| "https://api.openai.com/v1".into());
                Arc::new(OpenAi::new("openai", &base, key, http))
            }
            ProviderKind::Ollama => {
                let base = env
                    .get("SERVICE_OLLAMA_URL")
                    .unwrap_or_else(|| "http://127.0.0.1:11434/v1".into());
                Arc::new(OpenAi::new("ollama", &base, None, http))
            }
            ProviderKind::Anthropic => {
                let key =
                    env.get("ANTHROPIC_API_KEY")
                        .ok_or_else(|| ProviderError::NotConfigured {
                            provider: "anthropic",
                            hint: "set ANTHROPIC_API_KEY".into(),
                        })?;
                let base = env
                    .get("SERVICE_ANTHROPIC_BASE_URL")
                    .unwrap_or_else(|| "https://api.anthropic.com".into());
                Arc::new(Anthropic::new(&base, key, http))
            }
            ProviderKind::Offline => Arc::new(Offline),
        })
    }
}
