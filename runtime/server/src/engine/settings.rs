//! Which provider and model agents run with. Chosen once at start from `SERVICE_PROVIDER` /
//! `[provider] default` and `SERVICE_MODEL` / `[provider] model`; credentials are read on every
//! run, so a key written through the API works without a restart.

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

#[derive(Debug, Clone)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    model: Option<String>,
}

impl ProviderSettings {
    pub fn load(env: &SettingsStore, file: &ProviderSection) -> anyhow::Result<Self> {
        let kind = match env.get("SERVICE_PROVIDER").or_else(|| file.default.clone()) {
            Some(name) => name.parse().map_err(anyhow::Error::msg)?,
            None => ProviderKind::Offline,
        };
        let model = env.get("SERVICE_MODEL").or_else(|| file.model.clone());
        Ok(Self { kind, model })
    }

    /// The configured model, else the provider's default.
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
