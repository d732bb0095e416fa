//! `service-runtime backup FILE` and `service-runtime restore FILE`: a data directory written
//! to one archive while the server runs, and brought back into a new directory.

use std::path::Path;

use anyhow::bail;
use service_runtime::backup;
use service_runtime::db;
use service_runtime::settings_store::SettingsStore;

pub fn write(data_dir: &Path, file: &Path, with_secrets: bool) -> anyhow::Result<()> {
    let env = SettingsStore::load(data_dir)?;
    if env.get(db::URL_VARIABLE).is_some() {
        // The database is not in the directory: its own tools copy it consistently.
        bail!(
            "the database is PostgreSQL ({} is set), which this command does not copy yet: \
             back it up with `pg_dump --format=custom --file=service.dump \"${}\"` and keep \
             config.toml and the adapters folder of {} beside it",
            db::URL_VARIABLE,
            db::URL_VARIABLE,
            data_dir.display()
        );
    }
    let manifest = backup::write(data_dir, file, with_secrets)?;
    let mut held = vec![format!("the database (schema {})", manifest.schema_version)];
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

pub fn restore(data_dir: &Path, file: &Path, force: bool) -> anyhow::Result<()> {
    let manifest = backup::restore(file, data_dir, force)?;
    outln!(
        "restored {} into {} (schema {}, written by service-runtime {} at {})",
        file.display(),
        data_dir.display(),
        manifest.schema_version,
        manifest.service_version,
        manifest.created_at
    )?;
    if !manifest.with_secrets {
        outln!("it held no secrets: set them again (.env, or the Settings tab)")?;
    }
    outln!(
        "start it with: service-runtime --data-dir {} serve",
        data_dir.display()
    )?;
    Ok(())
}
