//! Backups of a data directory, and restoring one into a new directory.
//!
//! An archive is a gzipped tar: `manifest.json` first (what wrote it, the schema version, the
//! backend), then the database (`database/service.sqlite`, or `database/postgres.dump` with
//! PostgreSQL), a consistent snapshot taken while the server runs, then `data/` with the files
//! the directory needs to come back: config.toml and the adapters, skills and uploads folders,
//! and `.env` only when asked for. Left out: the compiled-code cache (rebuilt at start), the
//! server's key, address and log (written by the next start).
//!
//! A restore unpacks into a folder beside the target, checks the manifest and the database
//! there, and only then loads the database and moves the files into place: a refused or
//! broken archive leaves the target as it was.

mod postgres;
mod sqlite;

pub use postgres::manual_command as postgres_manual_command;

use std::fs::File;
use std::io::{BufReader, BufWriter, Read};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, ensure};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};

use crate::db::{self, SCHEMA_VERSION};

/// The archive layout this build writes and reads.
pub const FORMAT: u32 = 1;

const MANIFEST: &str = "manifest.json";
const DATA: &str = "data";

/// What a backup keeps of the data directory besides the database.
const KEPT: [&str; 4] = ["config.toml", "adapters", "skills", "uploads"];
/// The secrets file, kept only when asked for.
const SECRETS: &str = ".env";

/// Where a data directory's database lives.
#[derive(Debug, Clone, Copy)]
pub enum Database<'a> {
    /// The directory's own SQLite file.
    Sqlite,
    /// The PostgreSQL database at this URL.
    Postgres(&'a str),
}

impl Database<'_> {
    fn backend(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres(_) => "postgres",
        }
    }

    /// Where the archive holds it.
    fn entry(backend: &str) -> anyhow::Result<&'static str> {
        match backend {
            "sqlite" => Ok("database/service.sqlite"),
            "postgres" => Ok("database/postgres.dump"),
            other => anyhow::bail!(
                "the archive holds a database of a kind this build does not know ({other})"
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The build that wrote it.
    pub service_version: String,
    /// The database's schema version.
    pub schema_version: u32,
    /// `sqlite` or `postgres`.
    pub backend: String,
    pub created_at: String,
    /// Whether `.env` is in it.
    pub with_secrets: bool,
    /// The data directory's entries it holds (config.toml, adapters, ...).
    pub files: Vec<String>,
}

/// Writes a backup of `data_dir` and its `database` to `out` (through a partial file renamed
/// at the end, so `out` is never half-written).
pub fn write(
    data_dir: &Path,
    database: Database<'_>,
    out: &Path,
    with_secrets: bool,
) -> anyhow::Result<Manifest> {
    let partial = sibling(out, "partial")?;
    let snapshot = sibling(out, "snapshot")?;
    let written = (|| {
        let schema_version = match database {
            Database::Sqlite => {
                let live = data_dir.join(db::FILE_NAME);
                ensure!(
                    live.is_file(),
                    "no database at {}: nothing to back up",
                    live.display()
                );
                sqlite::snapshot(&live, &snapshot)?;
                sqlite::schema_of(&snapshot)?
            }
            Database::Postgres(url) => {
                let version = postgres::schema_of(url)?;
                ensure!(
                    version > 0,
                    "the database holds no service data: nothing to back up"
                );
                postgres::snapshot(url, &snapshot)?;
                version
            }
        };
        let mut files: Vec<String> = KEPT
            .iter()
            .filter(|name| data_dir.join(name).exists())
            .map(|name| name.to_string())
            .collect();
        if with_secrets && data_dir.join(SECRETS).is_file() {
            files.push(SECRETS.to_owned());
        }
        let manifest = Manifest {
            format: FORMAT,
            service_version: env!("CARGO_PKG_VERSION").to_owned(),
            schema_version,
            backend: database.backend().to_owned(),
            created_at: db::now(),
            with_secrets,
            files,
        };
        let file = File::create(&partial)
            .with_context(|| format!("cannot write {}", partial.display()))?;
        let mut archive =
            tar::Builder::new(GzEncoder::new(BufWriter::new(file), Compression::default()));
        let json = serde_json::to_vec_pretty(&manifest)?;
        let mut header = tar::Header::new_gnu();
        header.set_size(json.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(chrono::Utc::now().timestamp().max(0) as u64);
        archive.append_data(&mut header, MANIFEST, json.as_slice())?;
        archive.append_path_with_name(&snapshot, Database::entry(&manifest.backend)?)?;
        for name in &manifest.files {
            let path = data_dir.join(name);
            let inside = format!("{DATA}/{name}");
            if path.is_dir() {
                archive.append_dir_all(&inside, &path)?;
            } else {
                archive.append_path_with_name(&path, &inside)?;
            }
        }
        let mut gz = archive.into_inner()?;
        gz.try_finish()?;
        gz.finish()?
            .into_inner()
            .map_err(|e| e.into_error())?
            .sync_all()?;
        std::fs::rename(&partial, out)
            .with_context(|| format!("cannot write {}", out.display()))?;
        Ok(manifest)
    })();
    let _ = std::fs::remove_file(&snapshot);
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

/// Restores `archive` into `data_dir`, which must be empty or missing unless `force` (then
/// what the archive holds replaces the directory's database and those files). A PostgreSQL
/// archive is loaded into the database at `postgres_url`, which must hold no tables unless
/// `force`.
pub fn restore(
    archive: &Path,
    data_dir: &Path,
    postgres_url: Option<&str>,
    force: bool,
) -> anyhow::Result<Manifest> {
    let occupied = std::fs::read_dir(data_dir)
        .map(|mut entries| entries.next().is_some())
        .unwrap_or(false);
    ensure!(
        !occupied || force,
        "{} is not empty; restore into an empty directory, or pass --force to replace its \
         database and files with the archive's",
        data_dir.display()
    );
    let parent = data_dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    create(parent)?;
    let staging = sibling(data_dir, "restoring")?;
    let restored = (|| {
        let manifest = unpack(archive, &staging)?;
        let database = staging.join(Database::entry(&manifest.backend)?);
        if manifest.backend == "postgres" {
            let url = postgres_url.with_context(|| {
                format!(
                    "the archive holds a PostgreSQL database: set {} to the (empty) database \
                     to load it into",
                    db::URL_VARIABLE
                )
            })?;
            ensure!(
                force || !postgres::has_tables(url)?,
                "the database at {} holds tables already; restore into an empty database, or \
                 pass --force to replace what the archive holds",
                db::URL_VARIABLE
            );
            postgres::load(url, &database, force)?;
            create(data_dir)?;
        } else {
            create(data_dir)?;
            let live = data_dir.join(db::FILE_NAME);
            for suffix in ["-wal", "-shm"] {
                let mut log = live.clone().into_os_string();
                log.push(suffix);
                remove(Path::new(&log))?;
            }
            remove(&live)?;
            move_to(&database, &live)?;
        }
        put_files_in_place(&staging, data_dir, &manifest)?;
        Ok(manifest)
    })();
    let _ = std::fs::remove_dir_all(&staging);
    restored
}

/// Unpacks `archive` into `staging` and checks what it holds.
fn unpack(archive: &Path, staging: &Path) -> anyhow::Result<Manifest> {
    let file = File::open(archive).with_context(|| format!("cannot read {}", archive.display()))?;
    std::fs::create_dir_all(staging)?;
    let not_a_backup = || {
        format!(
            "{} is not a backup archive, or is damaged",
            archive.display()
        )
    };
    let mut entries = tar::Archive::new(GzDecoder::new(BufReader::new(file)));
    let mut manifest: Option<Manifest> = None;
    for entry in entries.entries().with_context(not_a_backup)? {
        let mut entry = entry.with_context(not_a_backup)?;
        let path = entry.path().with_context(not_a_backup)?.into_owned();
        let kind = entry.header().entry_type();
        ensure!(
            (kind.is_file() || kind.is_dir())
                && path.components().all(|c| matches!(c, Component::Normal(_))),
            "{}: the archive holds {} ({kind:?}), which a backup never does",
            archive.display(),
            path.display()
        );
        if path == Path::new(MANIFEST) {
            let mut json = String::new();
            entry.read_to_string(&mut json).with_context(not_a_backup)?;
            manifest = Some(read_manifest(&json)?);
            continue;
        }
        let Some(read) = &manifest else {
            anyhow::bail!("{}: its manifest does not come first", not_a_backup());
        };
        ensure!(
            path == Path::new(Database::entry(&read.backend)?) || path.starts_with(DATA),
            "{}: the archive holds {}, which a backup never does",
            archive.display(),
            path.display()
        );
        entry.unpack_in(staging).with_context(not_a_backup)?;
    }
    let manifest = manifest.with_context(not_a_backup)?;
    let database = staging.join(Database::entry(&manifest.backend)?);
    ensure!(
        database.is_file(),
        "{}: it holds no database",
        not_a_backup()
    );
    if manifest.backend == "postgres" {
        postgres::check(&database).with_context(not_a_backup)?;
    } else {
        let found = sqlite::schema_of(&database)?;
        ensure!(
            found == manifest.schema_version,
            "{}: its database has schema {found}, its manifest says {}",
            not_a_backup(),
            manifest.schema_version
        );
        sqlite::check(&database).with_context(not_a_backup)?;
    }
    Ok(manifest)
}

fn read_manifest(json: &str) -> anyhow::Result<Manifest> {
    let manifest: Manifest =
        serde_json::from_str(json).context("the archive's manifest is not one this build reads")?;
    ensure!(
        manifest.format == FORMAT,
        "the archive has format {}; this build reads format {FORMAT}",
        manifest.format
    );
    Database::entry(&manifest.backend)?;
    ensure!(
        manifest.schema_version <= SCHEMA_VERSION,
        "the archive's database has schema version {}, newer than the {SCHEMA_VERSION} this \
         build understands (it was written by service-runtime {}); restore it with that \
         version or newer",
        manifest.schema_version,
        manifest.service_version
    );
    Ok(manifest)
}

/// Moves each kept entry `staging` holds into `data_dir`, and removes the kept entries the
/// archive has none of. Secrets are replaced only by an archive that holds them.
fn put_files_in_place(staging: &Path, data_dir: &Path, manifest: &Manifest) -> anyhow::Result<()> {
    let secrets = manifest.with_secrets.then_some(SECRETS);
    for name in KEPT.into_iter().chain(secrets) {
        let target = data_dir.join(name);
        remove(&target)?;
        if manifest.files.iter().any(|held| held == name) {
            move_to(&staging.join(DATA).join(name), &target)?;
        }
    }
    Ok(())
}

fn create(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

fn move_to(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::rename(from, to)
        .with_context(|| format!("cannot move {} to {}", from.display(), to.display()))
}

fn remove(path: &Path) -> anyhow::Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(_) => return Ok(()),
    };
    removed.with_context(|| format!("cannot replace {}", path.display()))
}

/// A path beside `path` for work in progress (`.<name>.<what>-<random>`).
fn sibling(path: &Path, what: &str) -> anyhow::Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?
        .to_string_lossy();
    let random = &uuid::Uuid::new_v4().simple().to_string()[..8];
    Ok(path.with_file_name(format!(".{name}.{what}-{random}")))
}
