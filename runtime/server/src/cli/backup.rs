//! `service-runtime backup FILE` and `service-runtime restore FILE`: a data directory written
//! to one archive while the server runs, and brought back into a new directory.

use std::path::Path;

use crate::backup::{self, Database};
use crate::db;
use crate::settings_store::SettingsStore;

pub(super) fn write(data_dir: &Path, file: &Path, with_secrets: bool) -> anyhow::Result<()> {
    let env = SettingsStore::load(data_dir)?;
    let url = env.get(db::URL_VARIABLE);
    let database = match &url {
        Some(url) => Database::Postgres(url),
        None => Database::Sqlite,
    };
    let manifest = backup::write(data_dir, database, file, with_secrets)?;
    let mut held = vec![format!(
        "the {} database (schema {})",
        manifest.backend, manifest.schema_version
    )];
    held.extend(manifest.files.iter().cloned());
    outln!("backed up {} to {}", data_dir.display(), file.display())?;
    outln!("it holds {}", held.join(", "))?;
    if !with_secrets {
        outln!(
            "secrets (.env) are not in it: pass --with-secrets to include them, and keep the \
             archive as safe as they are"
        )?;
    }
    Ok(())
}

pub(super) fn restore(data_dir: &Path, file: &Path, force: bool) -> anyhow::Result<()> {
    // The database a PostgreSQL archive goes into: the environment's, or the directory's.
    let url = SettingsStore::load(data_dir)?.get(db::URL_VARIABLE);
    let manifest = backup::restore(file, data_dir, url.as_deref(), force)?;
    outln!(
        "restored {} into {} (the {} database, schema {}, written by service-runtime {} at {})",
        file.display(),
        data_dir.display(),
        manifest.backend,
        manifest.schema_version,
        manifest.service_version,
        manifest.created_at
    )?;
    if !manifest.with_secrets {
        outln!("it held no secrets: set them again (.env, or the Settings tab)")?;
    }
    if manifest.backend == "postgres" {
        outln!(
            "serve it with {} set to the database it was loaded into{}",
            db::URL_VARIABLE,
            // The restored .env may name the database the backup was taken from; the
            // environment wins over it.
            if manifest.with_secrets {
                " in the environment (the restored .env may name the one it was backed up from)"
            } else {
                ""
            }
        )?;
    }
    outln!(
        "start it with: service-runtime --data-dir {} serve",
        data_dir.display()
    )?;
    Ok(())
}
