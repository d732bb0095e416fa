//! `use_skill`: loads a Markdown skill (instructions for a recurring job) from
//! `<data_dir>/skills/<name>.md`.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::json;

use service_contract::tools::{RegistryError, Tool, ToolRegistry, args};

const MAX_BYTES: u64 = 64 * 1024;

#[derive(Deserialize)]
struct UseSkill {
    name: String,
}

fn available(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".md")
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    names
}

/// `dir` is `<data_dir>/skills`.
pub(super) fn register(registry: &ToolRegistry, dir: PathBuf) -> Result<(), RegistryError> {
    registry.register(
        Tool::new(
            "use_skill",
            "Loads the instructions of a named skill (a Markdown file the user wrote) so you can \
             follow them.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "description": "Skill name without .md"}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            move |input, _| {
                let dir = dir.clone();
                async move {
                let UseSkill { name } = args(input)?;
                tokio::task::spawn_blocking(move || {
                    let path = dir.join(format!("{name}.md"));
                    match std::fs::metadata(&path) {
                        Ok(meta) if meta.len() > MAX_BYTES => {
                            Err(format!("skill {name:?} is larger than {MAX_BYTES} bytes"))
                        }
                        Ok(_) => std::fs::read_to_string(&path).map_err(|e| e.to_string()),
                        Err(_) => Err(format!(
                            "no skill {name:?}; available: {}",
                            available(&dir).join(", ")
                        )),
                    }
                })
                .await
                .map_err(|e| e.to_string())?
                }
            },
        ),
        false,
    )
}
