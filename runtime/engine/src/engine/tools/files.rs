//! `analyze_file`: reads a text, Markdown, JSON or CSV file the user put in
//! `<data_dir>/uploads` and summarises it. Paths that leave that folder are refused.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use service_contract::tools::{RegistryError, Tool, ToolRegistry, args};

const MAX_BYTES: u64 = 512 * 1024;
const PREVIEW_CHARS: usize = 4000;

#[derive(Deserialize)]
struct Analyze {
    path: String,
}

/// Resolves `relative` inside `root`, refusing anything that ends up outside it (`..`,
/// absolute paths, symlinks pointing out).
pub(super) fn resolve_inside(root: &Path, relative: &str) -> Result<PathBuf, String> {
    let root = root
        .canonicalize()
        .map_err(|_| format!("{} does not exist", root.display()))?;
    let candidate = root.join(relative);
    let resolved = candidate
        .canonicalize()
        .map_err(|_| format!("no file {relative:?}"))?;
    if !resolved.starts_with(&root) {
        return Err(format!("{relative:?} is outside the allowed folder"));
    }
    Ok(resolved)
}

fn summarise(path: &Path, text: &str) -> Result<Value, String> {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let preview: String = text.chars().take(PREVIEW_CHARS).collect();
    let truncated = preview.len() < text.len();
    Ok(match extension.as_str() {
        "txt" | "md" | "markdown" => json!({
            "kind": if extension == "txt" { "text" } else { "markdown" },
            "lines": text.lines().count(),
            "words": text.split_whitespace().count(),
            "headings": text.lines().filter(|l| l.starts_with('#')).take(50).collect::<Vec<_>>(),
            "content": preview,
            "truncated": truncated,
        }),
        "json" => {
            let value: Value =
                serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
            let shape = match &value {
                Value::Object(map) => {
                    json!({"type": "object", "keys": map.keys().collect::<Vec<_>>()})
                }
                Value::Array(items) => json!({"type": "array", "length": items.len()}),
                other => json!({"type": "scalar", "value": other}),
            };
            json!({"kind": "json", "shape": shape, "content": preview, "truncated": truncated})
        }
        "csv" => {
            let mut lines = text.lines();
            let header: Vec<&str> = lines
                .next()
                .map(|h| h.split(',').map(str::trim).collect())
                .unwrap_or_default();
            let rows: Vec<&str> = lines.collect();
            json!({
                "kind": "csv",
                "columns": header,
                "rows": rows.len(),
                "first_rows": rows.iter().take(10).collect::<Vec<_>>(),
            })
        }
        other => {
            return Err(format!(
                "cannot analyze .{other} files; use txt, md, json or csv"
            ));
        }
    })
}

/// `root` is `<data_dir>/uploads`.
pub(super) fn register(registry: &ToolRegistry, root: PathBuf) -> Result<(), RegistryError> {
    registry.register(
        Tool::new(
            "analyze_file",
            "Reads a file from the uploads folder (txt, md, json or csv) and returns its \
             structure and content.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "description": "Path relative to the uploads folder"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            move |input, _| {
                let root = root.clone();
                async move {
                let Analyze { path } = args(input)?;
                tokio::task::spawn_blocking(move || {
                    let file = resolve_inside(&root, &path)?;
                    let size = std::fs::metadata(&file).map_err(|e| e.to_string())?.len();
                    if size > MAX_BYTES {
                        return Err(format!("{path:?} is {size} bytes; the limit is {MAX_BYTES}"));
                    }
                    let text = std::fs::read_to_string(&file).map_err(|_| format!("{path:?} is not UTF-8 text"))?;
                    let mut summary = summarise(&file, &text)?;
                    summary["path"] = json!(path);
                    summary["bytes"] = json!(size);
                    Ok(summary.to_string())
                })
                .await
                .map_err(|e| e.to_string())?
                }
            },
        ),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cannot_escape_the_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("uploads");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a.md"), "# A").unwrap();
        std::fs::write(tmp.path().join("secret.txt"), "x").unwrap();
        std::os::unix::fs::symlink(tmp.path().join("secret.txt"), root.join("link.txt")).unwrap();
        assert!(resolve_inside(&root, "sub/a.md").is_ok());
        assert!(
            resolve_inside(&root, "../secret.txt")
                .unwrap_err()
                .contains("outside")
        );
        assert!(
            resolve_inside(&root, "link.txt")
                .unwrap_err()
                .contains("outside")
        );
        let absolute = tmp.path().join("secret.txt");
        assert!(resolve_inside(&root, absolute.to_str().unwrap()).is_err());
    }

    #[test]
    fn summarises_csv_and_json() {
        let csv = summarise(Path::new("a.csv"), "name, age\nada,36\nalan,41\n").unwrap();
        assert_eq!(csv["columns"], json!(["name", "age"]));
        assert_eq!(csv["rows"], 2);
        let doc = summarise(Path::new("a.json"), r#"{"b":1,"a":2}"#).unwrap();
        assert_eq!(doc["shape"]["keys"], json!(["a", "b"]));
        assert!(summarise(Path::new("a.exe"), "").is_err());
    }
}
