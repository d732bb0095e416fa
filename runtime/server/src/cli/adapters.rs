//! `service-runtime adapters ...`: manage the WebAssembly adapters in the data directory. The
//! running server picks changes up by itself (it watches the folder).

use std::path::{Path, PathBuf};

use crate::app::{App, Role};
use crate::bus::Event;
use crate::db::{self, Backend};
use crate::settings_store::SettingsStore;
use crate::wasm::Wait;
use crate::wasm::grants::Grant;
use crate::wasm::inventory::{Kind, Listed, inventory};
use crate::wasm::recording::{self, Fixture, Mode};
use crate::wasm::shared::{self, write_atomically};
use crate::wasm::{GrantSource, check_name, shadow_file};
use anyhow::Context;
use clap::Subcommand;

use super::scaffold::{self, Lang, World};

#[derive(Subcommand)]
pub(super) enum AdaptersCommand {
    /// Validate a component (and its grant) and install it under the name it describes
    Install {
        file: PathBuf,
        /// Capability grant for it (TOML); kept beside the component as <name>.toml
        #[arg(long)]
        grant: Option<PathBuf>,
        /// Run it beside the serving build of its adapter instead: on live calls, its
        /// imports answered from theirs, nothing it does kept, its answers compared (`GET
        /// /api/adapters/NAME/shadow`); under the adapter's grant
        #[arg(long, conflicts_with = "grant")]
        shadow: bool,
    },
    /// Make an adapter's shadow build its serving one (the same swap as an install)
    Promote {
        #[arg(value_parser = adapter_name)]
        name: String,
    },
    /// Drop an adapter's shadow build; the serving one goes on as it was
    Unshadow {
        #[arg(value_parser = adapter_name)]
        name: String,
    },
    /// List every adapter the server would load: bundled components (and files overriding
    /// them), component files and native adapters
    List,
    /// Run a recorded call again, offline: the component (or a new build of it) gets every
    /// import answered from the recording, nothing reaches the network, the database or a
    /// model. Prints the output, then `match` (exit 0) or where it differs (exit 1)
    Replay {
        /// A recording's id (from `GET /api/adapters/NAME/recordings`) or a fixture file
        recording: String,
        /// The build to run instead of the installed component
        #[arg(long)]
        wasm: Option<PathBuf>,
        /// Also write the recording into this folder as a fixture (`<adapter>-<id>.json`),
        /// for an adapter's own tests to replay
        #[arg(long)]
        save: Option<PathBuf>,
    },
    /// Remove a component and its grant
    Remove {
        /// The adapter's name (never a path: nothing outside the adapters folder is touched)
        #[arg(value_parser = adapter_name)]
        name: String,
    },
    /// Write a ready-to-build adapter project: source, the contract's WIT, a grant and a
    /// README with its build command
    New {
        /// The adapter's name: up to 64 letters, digits, '-' and '_'
        name: String,
        #[arg(long, value_enum)]
        lang: Lang,
        /// `adapter`: the contract's world; `proxy`: a standard wasi:http/proxy component
        /// (Rust)
        #[arg(long, value_enum, default_value = "adapter")]
        world: World,
        /// The folder to create [default: ./NAME]; an existing one is refused
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Take the name of a bundled adapter (teamchat, webhook, ...): installed, yours
        /// replaces it
        #[arg(long)]
        replace: bool,
    },
}

fn adapter_name(name: &str) -> Result<String, String> {
    check_name(name)
        .map(|()| name.to_owned())
        .map_err(|e| e.to_string())
}

pub(super) async fn run(data_dir: &Path, command: AdaptersCommand) -> anyhow::Result<()> {
    let dir = data_dir.join("adapters");
    match command {
        AdaptersCommand::Install {
            file,
            grant: _,
            shadow: true,
        } => install_shadow(data_dir, &file).await?,
        AdaptersCommand::Promote { name } => promote(data_dir, &name).await?,
        AdaptersCommand::Unshadow { name } => unshadow(data_dir, &name).await?,
        AdaptersCommand::Install { file, grant, .. } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let grant_text = grant
                .as_ref()
                .map(|path| {
                    std::fs::read_to_string(path)
                        .with_context(|| format!("cannot read {}", path.display()))
                })
                .transpose()?;
            let has_grant = grant.is_some();
            let parsed = grant_text
                .as_deref()
                .map(|text| Grant::parse(text).map_err(|e| anyhow::anyhow!("invalid grant: {e}")))
                .transpose()?;
            let app = App::open(data_dir, Role::Command).await?;
            let generation = checked(&app, &file, &bytes, parsed)
                .await
                .with_context(|| format!("{} cannot be installed", file.display()))?;
            let name = &generation.name;
            let takes_over = !has_grant
                && app.components.loader().grant_source(name, Some(&bytes))
                    == GrantSource::NotTheBundled;
            if app.db.backend() == Backend::Postgres {
                // Every replica mirrors it into its own folder and loads it.
                let stored = name.clone();
                app.db
                    .call(move |conn| shared::put(conn, &stored, &bytes, grant_text.as_deref()))
                    .await?;
                app.bus.publish_and_wait(Event::ComponentsChanged).await?;
            } else {
                std::fs::create_dir_all(&dir)?;
                // The grant first: the component must never be loaded without it.
                if let Some(text) = grant_text {
                    write_atomically(&dir.join(format!("{name}.toml")), text.as_bytes())?;
                }
                write_atomically(&dir.join(format!("{name}.wasm")), &bytes)?;
            }
            outln!(
                "installed {name} {} ({}…){}",
                match generation.version.as_str() {
                    "" => "(wasi:http)",
                    version => version,
                },
                &generation.sha256[..12],
                if app.db.backend() == Backend::Postgres {
                    " into the shared database: every replica loads it"
                } else {
                    ""
                }
            )?;
            if takes_over {
                eprintln!(
                    "warning: {name} takes the place of the bundled {name}, but not its grant: \
                     it gets nothing until you give it one (--grant {name}.toml)"
                );
            }
            let ungranted = generation.ungranted();
            if !ungranted.is_empty() {
                eprintln!(
                    "warning: {name} imports {}, which its grant does not cover: calls to them are refused. \
                     A grant that allows them ({name}.toml):\n{}",
                    crate::wasm::imports_list(&ungranted),
                    generation.suggested_grant()
                );
            }
        }
        AdaptersCommand::List => {
            let app = App::open(data_dir, Role::Command).await?;
            out!("{}", list(&inventory(app.components.loader())))?;
        }
        AdaptersCommand::New {
            name,
            lang,
            world,
            dir,
            replace,
        } => {
            scaffold::check_free(&name, replace)?;
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            out!("{}", scaffold::create(&name, lang, world, &dir)?)?;
        }
        AdaptersCommand::Replay {
            recording,
            wasm,
            save,
        } => replay(data_dir, &recording, wasm.as_deref(), save.as_deref()).await?,
        AdaptersCommand::Remove { name } if shared_database(data_dir)? => {
            let app = App::open(data_dir, Role::Command).await?;
            let stored = name.clone();
            if !app
                .db
                .call(move |conn| shared::remove(conn, &stored))
                .await?
            {
                anyhow::bail!("no component named {name:?} in the shared database");
            }
            app.bus.publish_and_wait(Event::ComponentsChanged).await?;
            outln!("removed {name} from the shared database: every replica unloads it")?;
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
            outln!("removed {name}")?;
        }
    }
    Ok(())
}

/// The component of `file` (its `bytes`) checked under `grant` (the grant on disk when none).
async fn checked(
    app: &App,
    file: &Path,
    bytes: &[u8],
    grant: Option<Grant>,
) -> anyhow::Result<crate::wasm::Generation> {
    // A component that does not name itself (wasi:http) takes its file's name.
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    app.components.check(stem, bytes.to_vec(), grant).await
}

/// `adapters install FILE --shadow`: the build goes beside its adapter's serving one.
async fn install_shadow(data_dir: &Path, file: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let app = App::open(data_dir, Role::Command).await?;
    let generation = checked(&app, file, &bytes, None)
        .await
        .with_context(|| format!("{} cannot shadow", file.display()))?;
    let name = generation.name.clone();
    let loader = app.components.loader();
    let dir = loader.adapters_dir();
    if !dir.join(format!("{name}.wasm")).exists() && loader.bundled(&name).is_none() {
        anyhow::bail!("no adapter named {name:?} serves to be shadowed: install it first");
    }
    if app.db.backend() == Backend::Postgres {
        let key = shared::shadow_key(&name);
        app.db
            .call(move |conn| shared::put(conn, &key, &bytes, None))
            .await?;
        app.bus.publish_and_wait(Event::ComponentsChanged).await?;
    } else {
        write_atomically(&shadow_file(dir, &name), &bytes)?;
    }
    outln!(
        "{name} {} ({}…) shadows the serving build: GET /api/adapters/{name}/shadow compares them",
        generation.version,
        &generation.sha256[..12]
    )?;
    Ok(())
}

/// `adapters promote NAME`: the shadow build serves, through the folder (or the shared
/// database) as an install does.
async fn promote(data_dir: &Path, name: &str) -> anyhow::Result<()> {
    let app = App::open(data_dir, Role::Command).await?;
    let loader = app.components.loader();
    let dir = loader.adapters_dir().to_owned();
    // A bundled adapter's grant is given to the bundled component alone: the promoted build
    // keeps the grant it was shadowed under.
    let bundled_grant = match loader.grant_source(name, None) {
        GrantSource::Bundled(text) => Some(text),
        _ => None,
    };
    if app.db.backend() == Backend::Postgres {
        let stored = name.to_owned();
        let promoted = app
            .db
            .call(move |conn| {
                let promoted = shared::promote(conn, &stored, bundled_grant)?;
                if promoted {
                    crate::shadows::end(conn, &stored)?;
                }
                Ok(promoted)
            })
            .await?;
        anyhow::ensure!(promoted, "{name} has no shadow build to promote");
        app.bus.publish_and_wait(Event::ComponentsChanged).await?;
        outln!("promoted the shadow build of {name}: every replica serves it")?;
        return Ok(());
    }
    let shadow = shadow_file(&dir, name);
    anyhow::ensure!(shadow.exists(), "{name} has no shadow build to promote");
    let grant = dir.join(format!("{name}.toml"));
    if let Some(text) = bundled_grant.filter(|_| !grant.exists()) {
        write_atomically(&grant, text.as_bytes())?;
    }
    std::fs::rename(&shadow, dir.join(format!("{name}.wasm")))
        .with_context(|| format!("cannot promote {}", shadow.display()))?;
    let stored = name.to_owned();
    app.db
        .call(move |conn| crate::shadows::end(conn, &stored))
        .await?;
    outln!("promoted the shadow build of {name}: it serves now")?;
    Ok(())
}

/// `adapters unshadow NAME`: the shadow build goes, and its comparisons.
async fn unshadow(data_dir: &Path, name: &str) -> anyhow::Result<()> {
    let app = App::open(data_dir, Role::Command).await?;
    let stored = name.to_owned();
    if app.db.backend() == Backend::Postgres {
        let removed = app
            .db
            .call(move |conn| shared::remove(conn, &shared::shadow_key(&stored)))
            .await?;
        anyhow::ensure!(removed, "{name} has no shadow build");
        app.bus.publish_and_wait(Event::ComponentsChanged).await?;
    } else {
        let shadow = shadow_file(app.components.loader().adapters_dir(), name);
        anyhow::ensure!(shadow.exists(), "{name} has no shadow build");
        std::fs::remove_file(&shadow)
            .with_context(|| format!("cannot remove {}", shadow.display()))?;
    }
    let stored = name.to_owned();
    app.db
        .call(move |conn| crate::shadows::end(conn, &stored))
        .await?;
    outln!("dropped the shadow build of {name}")?;
    Ok(())
}

async fn replay(
    data_dir: &Path,
    recording: &str,
    wasm: Option<&Path>,
    save: Option<&Path>,
) -> anyhow::Result<()> {
    let app = App::open(data_dir, Role::Command).await?;
    let (fixture, id) = fixture(&app, recording).await?;
    if let Some(dir) = save {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(format!("{}-{id}.json", fixture.adapter));
        write_atomically(&path, serde_json::to_string_pretty(&fixture)?.as_bytes())?;
        outln!("saved {}", path.display())?;
    }
    let bytes = wasm
        .map(|path| std::fs::read(path).with_context(|| format!("cannot read {}", path.display())))
        .transpose()?;
    let generation = app
        .components
        .for_replay(&fixture.adapter, bytes)
        .await
        .with_context(|| format!("cannot load {} to replay it", fixture.adapter))?;
    let sandbox = app.components.loader().sandbox();
    let prepared = generation.prepared();
    let replayed = recording::replay(sandbox, &prepared, &fixture, Mode::Replay, Wait::Yes).await?;
    outln!("output: {}", replayed.output)?;
    if let Some(error) = &replayed.error {
        outln!("ended: {error}")?;
    }
    if replayed.matches(&fixture) {
        outln!("match")?;
        return Ok(());
    }
    outln!("differs")?;
    if let Some(diverged) = &replayed.diverged {
        outln!(
            "imports: the first that differs is #{} (from 0): the recording has {}, the replay made {}",
            diverged["at"],
            diverged["expected"],
            diverged["got"]
        )?;
    }
    if replayed.outcome != fixture.outcome || replayed.output != fixture.output {
        outln!("recorded output ({}): {}", fixture.outcome, fixture.output)?;
    }
    anyhow::bail!("the replay differs from the recording")
}

/// The recording `given` names: a fixture file, or an id in the database; and its id.
async fn fixture(app: &App, given: &str) -> anyhow::Result<(Fixture, String)> {
    let path = Path::new(given);
    if path.is_file() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let fixture: Fixture = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a recording", path.display()))?;
        // Its adapter names a file of the adapters folder: never a path.
        check_name(&fixture.adapter)
            .with_context(|| format!("{} is not a recording", path.display()))?;
        let id = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(given)
            .to_owned();
        return Ok((fixture, id));
    }
    let id = given.to_owned();
    let found = app
        .db
        .call(move |conn| crate::recordings::get(conn, None, &id))
        .await?
        .with_context(|| format!("no recording {given:?}: neither a file nor a recording's id"))?;
    let imports = match found.imports {
        serde_json::Value::Array(imports) => imports,
        _ => Vec::new(),
    };
    let fixture = Fixture {
        adapter: found.summary.adapter,
        export: found.summary.export,
        outcome: found.summary.outcome,
        input: found.input,
        imports,
        output: found.output,
    };
    Ok((fixture, found.summary.id))
}

/// Whether the data directory's replicas share PostgreSQL (components then live there).
fn shared_database(data_dir: &Path) -> anyhow::Result<bool> {
    Ok(SettingsStore::load(data_dir)?
        .get(db::URL_VARIABLE)
        .is_some())
}

/// The table `adapters list` prints: name, kind, where it comes from, its grant, and below a
/// row what would keep it from serving.
fn list(adapters: &[Listed]) -> String {
    let rows: Vec<[String; 4]> = adapters
        .iter()
        .map(|a| {
            [
                a.name.clone(),
                a.kind.as_str().to_owned(),
                origin(a),
                a.grant.as_ref().map_or_else(|| "-".to_owned(), grant),
            ]
        })
        .collect();
    let header = ["NAME", "KIND", "FROM", "GRANT"].map(str::to_owned);
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            std::iter::once(&header)
                .chain(&rows)
                .map(|row| row[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |row: &[String; 4]| {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("{}\n", cells.join("  ").trim_end())
    };
    let mut out = line(&header);
    for (adapter, row) in adapters.iter().zip(&rows) {
        out.push_str(&line(row));
        if let Some(problem) = &adapter.problem {
            out.push_str(&format!("    ! {problem}\n"));
        }
    }
    out
}

fn origin(adapter: &Listed) -> String {
    let file = adapter.file.as_ref().map(|(path, size)| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        format!("{name} ({size} bytes)")
    });
    match (adapter.kind, file) {
        (Kind::Native, _) => "built into the server".to_owned(),
        (Kind::Bundled, None) => "built into the binary".to_owned(),
        (Kind::Bundled, Some(file)) => format!("{file}, overriding the bundled one"),
        (Kind::Component, file) => file.unwrap_or_default(),
    }
}

fn grant(source: &GrantSource) -> String {
    match source {
        GrantSource::File(path) => path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned(),
        GrantSource::Config => "config.toml".to_owned(),
        GrantSource::Bundled(_) => "bundled default".to_owned(),
        GrantSource::Nothing => "none".to_owned(),
        GrantSource::NotTheBundled => "none (the bundled default is the bundled one's)".to_owned(),
    }
}
