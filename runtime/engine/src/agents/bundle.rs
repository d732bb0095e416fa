//! A bundle is a portable agent definition: what the store offers, what install turns into a
//! profile, and what export produces from one. Export followed by import gives back an equal
//! profile.

use serde::{Deserialize, Serialize};

use super::profiles::{Profile, ProfileInput, ToolsInput};
use super::schemas;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct Bundle {
    /// Addresses the bundle in the API (`/api/store/{slug}`).
    pub slug: String,
    /// Display name; the installed profile takes this name (a profile's name rules).
    #[schema(required, schema_with = schemas::name)]
    pub name: String,
    pub role: String,
    pub description: String,
    /// The persona.
    #[schema(required, schema_with = schemas::prompt)]
    pub system_prompt: String,
    pub recommended_model: Option<String>,
    /// `null` installs a profile with no tool list set (it inherits every ungated tool).
    #[schema(schema_with = schemas::tool_list)]
    pub recommended_tools: Option<Vec<String>>,
    /// Advisory: the adapters this agent is meant to be reached through.
    pub paired_adapters: Vec<String>,
    #[schema(schema_with = schemas::color)]
    pub color: Option<String>,
}

impl Bundle {
    /// Exports a profile. A profile installed from a featured bundle keeps that bundle's role
    /// and paired adapters; a custom one's role is its one-line description.
    pub fn from_profile(profile: &Profile, featured: Option<&Bundle>) -> Self {
        Self {
            slug: slugify(&profile.name),
            name: profile.name.clone(),
            role: featured.map_or_else(|| profile.description.clone(), |b| b.role.clone()),
            description: profile.description.clone(),
            system_prompt: profile.system_prompt.clone(),
            recommended_model: profile.default_model.clone(),
            recommended_tools: profile.tools.clone(),
            paired_adapters: featured
                .map(|b| b.paired_adapters.clone())
                .unwrap_or_default(),
            color: profile.color.clone(),
        }
    }

    /// The profile this bundle installs as, still to be validated.
    pub fn profile_input(&self) -> ProfileInput {
        ProfileInput {
            name: Some(self.name.clone()),
            system_prompt: Some(self.system_prompt.clone()),
            description: Some(self.description.clone()),
            color: self.color.clone(),
            default_model: self.recommended_model.clone(),
            tools: self.recommended_tools.clone().map(ToolsInput::List),
            // Who may use an installed agent is the installer's to decide.
            access: None,
        }
    }
}

/// Lower-case ASCII letters and digits joined by single dashes; `agent` when nothing is left.
pub(crate) fn slugify(name: &str) -> String {
    let mut slug = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        "agent".to_owned()
    } else {
        slug.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_url_safe() {
        assert_eq!(slugify("Atlas"), "atlas");
        assert_eq!(slugify("  Night Owl (v2)! "), "night-owl-v2");
        assert_eq!(slugify("日本"), "agent");
    }
}
