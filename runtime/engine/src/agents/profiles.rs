//! Agent profiles: the persona, model and tool allowance an agent runs with.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};
use service_contract::tools::WILDCARD_SUFFIX;

use super::schemas;
use crate::access::AgentAccess;
use crate::db::{self, Conn, Row};
use crate::error::{Error, Result};
use crate::params;

/// Name of the profile that always exists.
pub const DEFAULT_PROFILE: &str = "default";

const DEFAULT_SYSTEM_PROMPT: &str = "You are a helpful, concise assistant. Use the tools you are \
    given when they help, and say plainly when you do not know something.";

pub(super) const MAX_NAME: usize = 64;
pub(super) const MAX_PROMPT: usize = 32 * 1024;
const MAX_DESCRIPTION: usize = 500;
const MAX_MODEL: usize = 200;
pub(super) const MAX_TOOL_NAME: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Profile {
    pub name: String,
    pub system_prompt: String,
    pub description: String,
    pub color: Option<String>,
    /// `None` inherits the configured model.
    pub default_model: Option<String>,
    /// `None` means not set (every ungated tool); `Some(vec![])` means no tools at all.
    pub tools: Option<Vec<String>>,
    /// Who may use it besides admins; `None`: everyone who may chat.
    pub access: Option<AgentAccess>,
    pub created_at: String,
    pub updated_at: String,
}

/// The create payload as it arrives; [`ProfileInput::validate`] turns it into a [`NewProfile`].
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[schema(description = "A new agent profile. Keys it does not know are ignored.")]
pub struct ProfileInput {
    #[schema(required, schema_with = schemas::name)]
    pub name: Option<String>,
    /// The persona: at most 32,768 characters, not blank.
    #[schema(required, schema_with = schemas::prompt)]
    pub system_prompt: Option<String>,
    /// One line about the agent: at most 500 characters once trimmed.
    pub description: Option<String>,
    #[schema(schema_with = schemas::color)]
    pub color: Option<String>,
    /// Blank (or `null`) inherits the configured model; at most 200 characters once trimmed.
    pub default_model: Option<String>,
    #[schema(schema_with = schemas::tools)]
    pub tools: Option<ToolsInput>,
    /// `null` (or absent): everyone who may chat.
    pub access: Option<AgentAccess>,
}

/// Tools arrive as a JSON list or, from forms, as one comma-separated string.
#[derive(Debug, Clone)]
pub enum ToolsInput {
    List(Vec<String>),
    Csv(String),
}

impl<'de> Deserialize<'de> for ToolsInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;

        impl<'de> de::Visitor<'de> for Visitor {
            type Value = ToolsInput;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of tool names or a comma-separated string")
            }

            fn visit_str<E: de::Error>(self, csv: &str) -> std::result::Result<ToolsInput, E> {
                Ok(ToolsInput::Csv(csv.to_owned()))
            }

            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<ToolsInput, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push(name);
                }
                Ok(ToolsInput::List(names))
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

/// An update as it arrives: absent fields stay as they are, `null` clears one (`tools: null`
/// unsets the tool list). The name cannot change.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[schema(description = "Changes to a profile: absent keys stay as they are, `null` clears one.")]
pub struct ProfilePatch {
    /// The current name, if given: a profile cannot be renamed.
    pub name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = schemas::prompt)]
    pub system_prompt: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub description: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = schemas::color)]
    pub color: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub default_model: Option<Option<String>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(schema_with = schemas::tools)]
    pub tools: Option<Option<ToolsInput>>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<AgentAccess>)]
    pub access: Option<Option<AgentAccess>>,
}

/// `Some(value)` for a field that is present, even as `null` (then `Some(None)`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> std::result::Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

impl ProfilePatch {
    /// The profile `current` becomes, still to be validated. A `name` other than the current
    /// one is refused: schedules and adapters refer to profiles by name.
    pub fn apply(self, current: &Profile) -> Result<ProfileInput> {
        if self.name.as_ref().is_some_and(|name| *name != current.name) {
            return Err(Error::field(
                "name",
                "an agent cannot be renamed (schedules and adapters refer to it by name); \
                 create one under the new name and delete this one",
            ));
        }
        let keep = |patch: Option<Option<String>>, current: Option<&String>| match patch {
            Some(value) => value,
            None => current.cloned(),
        };
        Ok(ProfileInput {
            name: Some(current.name.clone()),
            system_prompt: keep(self.system_prompt, Some(&current.system_prompt)),
            description: keep(self.description, Some(&current.description)),
            color: keep(self.color, current.color.as_ref()),
            default_model: keep(self.default_model, current.default_model.as_ref()),
            tools: match self.tools {
                Some(tools) => tools,
                None => current.tools.clone().map(ToolsInput::List),
            },
            access: self.access.unwrap_or_else(|| current.access.clone()),
        })
    }
}

/// A profile that passed validation and is ready to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewProfile {
    pub name: String,
    pub system_prompt: String,
    pub description: String,
    pub color: Option<String>,
    pub default_model: Option<String>,
    pub tools: Option<Vec<String>>,
    pub access: Option<AgentAccess>,
}

impl ProfileInput {
    pub fn validate(self) -> Result<NewProfile> {
        Ok(NewProfile {
            name: validate_name(self.name)?,
            system_prompt: validate_prompt(self.system_prompt)?,
            description: validate_description(self.description)?,
            color: validate_color(self.color)?,
            default_model: validate_model(self.default_model)?,
            tools: self.tools.map(validate_tools).transpose()?,
            access: self
                .access
                .map(|access| access.check().map(|()| access))
                .transpose()?,
        })
    }
}

fn validate_name(name: Option<String>) -> Result<String> {
    let name = name.unwrap_or_default();
    if name.trim().is_empty() {
        return Err(Error::field("name", "name is required"));
    }
    if name.trim() != name {
        return Err(Error::field(
            "name",
            "name must not start or end with whitespace",
        ));
    }
    if name.chars().count() > MAX_NAME {
        return Err(Error::field(
            "name",
            format!("name must be at most {MAX_NAME} characters"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::field(
            "name",
            "name must not contain control characters",
        ));
    }
    // A profile is managed at /api/agents/{name}: its name must be one path segment there.
    if name == "." || name == ".." || name.contains(['/', '\\', '?', '#', '%']) {
        return Err(Error::field(
            "name",
            "name must be usable in a web address: not . or .., and none of / \\ ? # %",
        ));
    }
    Ok(name)
}

fn validate_prompt(prompt: Option<String>) -> Result<String> {
    let prompt = prompt.unwrap_or_default();
    if prompt.trim().is_empty() {
        return Err(Error::field("system_prompt", "system_prompt is required"));
    }
    if prompt.chars().count() > MAX_PROMPT {
        return Err(Error::field(
            "system_prompt",
            format!("system_prompt must be at most {MAX_PROMPT} characters"),
        ));
    }
    Ok(prompt)
}

fn validate_description(description: Option<String>) -> Result<String> {
    let description = description.unwrap_or_default().trim().to_owned();
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(Error::field(
            "description",
            format!("description must be at most {MAX_DESCRIPTION} characters"),
        ));
    }
    Ok(description)
}

/// Accepts `#rgb` or `#rrggbb`; stores lower case. Blank means no color.
fn validate_color(color: Option<String>) -> Result<Option<String>> {
    let Some(color) = non_blank(color) else {
        return Ok(None);
    };
    let hex = color.strip_prefix('#').unwrap_or("");
    if !matches!(hex.len(), 3 | 6) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Error::field(
            "color",
            format!("color must be a hex color like #4f8cff, got {color:?}"),
        ));
    }
    Ok(Some(color.to_ascii_lowercase()))
}

fn validate_model(model: Option<String>) -> Result<Option<String>> {
    let model = non_blank(model);
    if model
        .as_ref()
        .is_some_and(|m| m.chars().count() > MAX_MODEL)
    {
        return Err(Error::field(
            "default_model",
            format!("default_model must be at most {MAX_MODEL} characters"),
        ));
    }
    Ok(model)
}

/// Trims each name, drops empty entries and duplicates (first occurrence wins).
fn validate_tools(tools: ToolsInput) -> Result<Vec<String>> {
    let names: Vec<String> = match tools {
        ToolsInput::List(list) => list,
        ToolsInput::Csv(csv) => csv.split(',').map(str::to_owned).collect(),
    };
    let mut out: Vec<String> = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        // `prefix__*` stands for every tool so named (an MCP server's).
        let stem = name.strip_suffix(WILDCARD_SUFFIX).unwrap_or(name);
        let valid = name.len() <= MAX_TOOL_NAME
            && !stem.is_empty()
            && stem
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid {
            return Err(Error::field(
                "tools",
                format!(
                    "tool name {name:?} is not valid: use letters, digits, '_', '-' or '.', or \
                     end in {WILDCARD_SUFFIX} for every tool so named (at most {MAX_TOOL_NAME})"
                ),
            ));
        }
        if !out.iter().any(|seen| seen == name) {
            out.push(name.to_owned());
        }
    }
    Ok(out)
}

fn non_blank(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

const COLUMNS: &str = "name, system_prompt, description, color, default_model, tools, \
    created_at, updated_at, access";

fn from_row(row: &Row<'_>) -> Result<Profile> {
    let tools: Option<String> = row.get(5)?;
    Ok(Profile {
        name: row.get(0)?,
        system_prompt: row.get(1)?,
        description: row.get(2)?,
        color: row.get(3)?,
        default_model: row.get(4)?,
        tools: json_column(tools)?,
        created_at: row.get(6)?,
        updated_at: row.get(7)?,
        access: json_column(row.get(8)?)?,
    })
}

fn json_column<T: serde::de::DeserializeOwned>(text: Option<String>) -> Result<Option<T>> {
    text.map(|json| serde_json::from_str(&json))
        .transpose()
        .map_err(|e| {
            Error::Internal(anyhow::anyhow!(
                "a profile's column is not what it wrote: {e}"
            ))
        })
}

fn to_json<T: Serialize>(value: Option<&T>) -> Result<Option<String>> {
    Ok(value
        .map(serde_json::to_string)
        .transpose()
        .map_err(anyhow::Error::from)?)
}

/// Inserts a profile; an existing name is a conflict and leaves that profile untouched.
pub fn insert(conn: &Conn, profile: &NewProfile) -> Result<Profile> {
    let now = db::now();
    let (tools, access) = (
        to_json(profile.tools.as_ref())?,
        to_json(profile.access.as_ref())?,
    );
    // One statement: a connection lost after it leaves no doubt whether the profile exists.
    conn.query_opt(
        &format!(
            "INSERT INTO agent_profiles ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8) \
             ON CONFLICT (name) DO NOTHING RETURNING {COLUMNS}"
        ),
        params![
            profile.name,
            profile.system_prompt,
            profile.description,
            profile.color,
            profile.default_model,
            tools,
            now,
            access
        ],
        from_row,
    )?
    .ok_or_else(|| Error::conflict(format!("an agent named {:?} already exists", profile.name)))
}

/// Replaces every field of the profile named `profile.name`; 404 when there is none.
pub fn update(conn: &Conn, profile: &NewProfile) -> Result<Profile> {
    let (tools, access) = (
        to_json(profile.tools.as_ref())?,
        to_json(profile.access.as_ref())?,
    );
    conn.query_opt(
        &format!(
            "UPDATE agent_profiles SET system_prompt = ?2, description = ?3, color = ?4, \
             default_model = ?5, tools = ?6, updated_at = ?7, access = ?8 WHERE name = ?1 \
             RETURNING {COLUMNS}"
        ),
        params![
            profile.name,
            profile.system_prompt,
            profile.description,
            profile.color,
            profile.default_model,
            tools,
            db::now(),
            access
        ],
        from_row,
    )?
    .ok_or_else(|| not_found(&profile.name))
}

/// Deletes a profile. `default` cannot be deleted: it answers when no agent is named.
pub fn delete(conn: &Conn, name: &str) -> Result<()> {
    if name == DEFAULT_PROFILE {
        return Err(Error::conflict(
            "the default agent cannot be deleted: it answers when no agent is named; edit it \
             instead",
        ));
    }
    if conn.execute("DELETE FROM agent_profiles WHERE name = ?1", params![name])? == 0 {
        return Err(not_found(name));
    }
    Ok(())
}

pub fn not_found(name: &str) -> Error {
    Error::not_found(format!("no agent named {name:?}"))
}

/// Looks a profile up by its exact, case-sensitive name.
pub fn get(conn: &Conn, name: &str) -> Result<Option<Profile>> {
    conn.query_opt(
        &format!("SELECT {COLUMNS} FROM agent_profiles WHERE name = ?1"),
        params![name],
        from_row,
    )
}

/// Every profile, oldest first (so `default` leads).
pub fn list(conn: &Conn) -> Result<Vec<Profile>> {
    conn.query(
        &format!("SELECT {COLUMNS} FROM agent_profiles ORDER BY created_at, rowid"),
        params![],
        from_row,
    )
}

/// Creates the `default` profile when it is missing.
pub fn ensure_default(conn: &Conn) -> Result<()> {
    let default = NewProfile {
        name: DEFAULT_PROFILE.to_owned(),
        system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
        description: "General-purpose assistant".to_owned(),
        color: None,
        default_model: None,
        tools: None,
        access: None,
    };
    match insert(conn, &default) {
        Ok(_) | Err(Error::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    fn input(name: &str) -> ProfileInput {
        ProfileInput {
            name: Some(name.to_owned()),
            system_prompt: Some("Be brief.".to_owned()),
            ..ProfileInput::default()
        }
    }

    fn field_of(err: Error) -> &'static str {
        match err {
            Error::InvalidField { field, .. } => field,
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn tools_from_csv_are_trimmed_and_deduplicated() {
        let mut i = input("a");
        i.tools = Some(ToolsInput::Csv(
            " web_search, create_note,,web_search ".into(),
        ));
        assert_eq!(
            i.validate().unwrap().tools,
            Some(vec!["web_search".to_owned(), "create_note".to_owned()])
        );
    }

    #[test]
    fn empty_tool_list_is_kept_apart_from_unset() {
        let mut i = input("a");
        i.tools = Some(ToolsInput::Csv(String::new()));
        assert_eq!(i.validate().unwrap().tools, Some(vec![]));
        assert_eq!(input("a").validate().unwrap().tools, None);
    }

    #[test]
    fn rejects_bad_fields_by_name() {
        assert_eq!(field_of(input(" ").validate().unwrap_err()), "name");
        assert_eq!(field_of(input(" x").validate().unwrap_err()), "name");
        let mut i = input("a");
        i.system_prompt = Some("  ".into());
        assert_eq!(field_of(i.validate().unwrap_err()), "system_prompt");
        for bad in ["red", "#12", "#gggggg", "123456"] {
            let mut i = input("a");
            i.color = Some(bad.into());
            assert_eq!(field_of(i.validate().unwrap_err()), "color", "{bad}");
        }
        let mut i = input("a");
        i.tools = Some(ToolsInput::List(vec!["rm -rf".into()]));
        assert_eq!(field_of(i.validate().unwrap_err()), "tools");
    }

    #[test]
    fn color_is_normalised_and_blank_model_inherits() {
        let mut i = input("a");
        i.color = Some("#ABCDEF".into());
        i.default_model = Some("  ".into());
        let p = i.validate().unwrap();
        assert_eq!(p.color.as_deref(), Some("#abcdef"));
        assert_eq!(p.default_model, None);
    }

    #[test]
    fn insert_conflicts_on_existing_name_and_keeps_the_original() {
        each_conn(Backends::Both, |conn| {
            let first = insert(conn, &input("Atlas").validate().unwrap()).unwrap();
            let mut other = input("Atlas");
            other.system_prompt = Some("different".into());
            assert!(matches!(
                insert(conn, &other.validate().unwrap()),
                Err(Error::Conflict(_))
            ));
            assert_eq!(get(conn, "Atlas").unwrap(), Some(first));
            assert_eq!(
                get(conn, "atlas").unwrap(),
                None,
                "names match case-sensitively"
            );
        });
    }

    #[test]
    fn a_patch_changes_what_it_names_and_keeps_the_rest() {
        each_conn(Backends::Both, |conn| {
            let mut original = input("Quill");
            original.description = Some("editor".into());
            original.tools = Some(ToolsInput::List(vec!["search_notes".into()]));
            let current = insert(conn, &original.validate().unwrap()).unwrap();

            let patch: ProfilePatch =
                serde_json::from_str(r##"{"color": "#112233", "tools": null}"##).unwrap();
            let updated =
                update(conn, &patch.apply(&current).unwrap().validate().unwrap()).unwrap();
            assert_eq!(updated.color.as_deref(), Some("#112233"));
            assert_eq!(updated.tools, None, "null unsets the tool list");
            assert_eq!(updated.description, "editor", "absent fields stay");
            assert_eq!(updated.created_at, current.created_at);

            let same_name: ProfilePatch = serde_json::from_str(r#"{"name": "Quill"}"#).unwrap();
            assert!(same_name.apply(&updated).is_ok());
            let rename: ProfilePatch = serde_json::from_str(r#"{"name": "Ink"}"#).unwrap();
            assert_eq!(field_of(rename.apply(&updated).unwrap_err()), "name");
            let cleared: ProfilePatch = serde_json::from_str(r#"{"system_prompt": null}"#).unwrap();
            let input = cleared.apply(&updated).unwrap();
            assert_eq!(field_of(input.validate().unwrap_err()), "system_prompt");
        });
    }

    #[test]
    fn delete_refuses_the_default_and_unknown_names() {
        each_conn(Backends::Both, |conn| {
            ensure_default(conn).unwrap();
            insert(conn, &input("Temp").validate().unwrap()).unwrap();
            delete(conn, "Temp").unwrap();
            assert_eq!(get(conn, "Temp").unwrap(), None);
            assert!(matches!(delete(conn, "Temp"), Err(Error::NotFound(_))));
            assert!(matches!(
                delete(conn, DEFAULT_PROFILE),
                Err(Error::Conflict(_))
            ));
            assert!(get(conn, DEFAULT_PROFILE).unwrap().is_some());
        });
    }
}
