//! `service-runtime adapters ...`: manage the WebAssembly adapters in the data directory. The
//! running server picks changes up by itself (it watches the folder).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;
use service_runtime::app::App;
use service_runtime::wasm::grants::Grant;

#[derive(Subcommand)]
pub enum AdaptersCommand {
    /// Validate a component (and its grant) and install it under the name it describes
    Install {
        file: PathBuf,
        /// Capability grant for it (TOML); kept beside the component as <name>.toml
        #[arg(long)]
        grant: Option<PathBuf>,
    },
    /// List installed components
    List,
    /// Remove a component and its grant
    Remove { name: String },
}

/// Writes beside the target and renames, so the server's watcher never reads half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot install {}", path.display()))
}

pub async fn run(data_dir: &Path, command: AdaptersCommand) -> anyhow::Result<()> {
    let dir = data_dir.join("adapters");
    match command {
        AdaptersCommand::Install { file, grant } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let grant_text = grant
                .as_ref()
                .map(|path| {
                    std::fs::read_to_string(path)
                        .with_context(|| format!("cannot read {}", path.display()))
                })
                .transpose()?;
            let parsed = grant_text
                .as_deref()
                .map(|text| Grant::parse(text).map_err(|e| anyhow::anyhow!("invalid grant: {e}")))
                .transpose()?;
            let app = App::open(data_dir)?;
            let generation = app
                .components
                .check(bytes.clone(), parsed)
                .await
                .with_context(|| format!("{} cannot be installed", file.display()))?;
            let name = &generation.name;
            std::fs::create_dir_all(&dir)?;
            // The grant first: the component must never be loaded without it.
            if let Some(text) = grant_text {
                write_atomically(&dir.join(format!("{name}.toml")), text.as_bytes())?;
            }
            write_atomically(&dir.join(format!("{name}.wasm")), &bytes)?;
            println!(
                "installed {name} {} ({}…)",
                generation.version,
                &generation.sha256[..12]
            );
            let ungranted = generation.ungranted();
            if !ungranted.is_empty() {
                eprintln!(
                    "warning: {name} imports {}, which its grant does not cover: calls to them are refused. \
                     A grant that allows them ({name}.toml):\n{}",
                    service_runtime::wasm::imports_list(&ungranted),
                    generation.suggested_grant()
                );
            }
        }
        AdaptersCommand::List => {
            let mut rows: Vec<(String, u64, bool)> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|entry| {
                    let path = entry.path();
                    let name = path.file_stem()?.to_str()?.to_owned();
                    (path.extension()? == "wasm").then(|| {
                        let grant = dir.join(format!("{name}.toml")).exists();
                        (name, entry.metadata().map(|m| m.len()).unwrap_or(0), grant)
                    })
                })
                .collect();
            rows.sort();
            if rows.is_empty() {
                println!("no components in {}", dir.display());
            }
            for (name, size, grant) in rows {
                println!(
                    "{name:<24} {size:>9} bytes  grant: {}",
                    if grant { "yes" } else { "none" }
                );
            }
        }
        AdaptersCommand::Remove { name } => {
            let wasm = dir.join(format!("{name}.wasm"));
            if !wasm.exists() {
                anyhow::bail!("no component named {name:?} in {}", dir.display());
            }
            std::fs::remove_file(&wasm)?;
            let grant = dir.join(format!("{name}.toml"));
            if grant.exists() {
                std::fs::remove_file(grant)?;
            }
            println!("removed {name}");
        }
    }
    Ok(())
}
