//! The PostgreSQL database of a backup, through PostgreSQL's own tools: `pg_dump` (a consistent
//! snapshot in one repeatable-read transaction, writers never wait), `pg_restore` (checked
//! with `--list` first, loaded in a single transaction), `psql` for the schema version. The
//! connection goes to them as libpq's environment variables, never as arguments: a password
//! in a URL would show in the process list.

use std::path::Path;
use std::process::{Command, Output};

use anyhow::{Context, bail, ensure};
use tokio_postgres::config::{Host, SslMode};

use crate::db;

/// The command that copies the database at `URL_VARIABLE` by hand, for a machine without
/// PostgreSQL's client tools.
pub fn manual_command() -> String {
    format!(
        "pg_dump --format=custom --file=service.dump \"${}\"",
        db::URL_VARIABLE
    )
}

/// A consistent copy of the database at `url` written to `into` (custom format).
pub(super) fn snapshot(url: &str, into: &Path) -> anyhow::Result<()> {
    let out = tool("pg_dump", url)?
        .args(["--format=custom", "--no-owner", "--no-privileges", "--file"])
        .arg(into)
        .output();
    succeeded("pg_dump", out)
}

/// The service's schema version in the database at `url` (0: none there).
pub(super) fn schema_of(url: &str) -> anyhow::Result<u32> {
    let out = tool("psql", url)?
        .args(["--no-psqlrc", "--tuples-only", "--no-align", "--command"])
        .arg(
            "SELECT CASE WHEN to_regclass('service_schema') IS NULL THEN 0 \
             ELSE (SELECT version FROM service_schema) END",
        )
        .output();
    let text = String::from_utf8_lossy(&succeeded_with("psql", out)?.stdout).into_owned();
    text.trim()
        .parse()
        .with_context(|| format!("psql answered {text:?} for the schema version"))
}

/// Whether the database at `url` holds tables of its own.
pub(super) fn has_tables(url: &str) -> anyhow::Result<bool> {
    let out = tool("psql", url)?
        .args(["--no-psqlrc", "--tuples-only", "--no-align", "--command"])
        .arg("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        .output();
    let text = String::from_utf8_lossy(&succeeded_with("psql", out)?.stdout).into_owned();
    Ok(text.trim() != "0")
}

/// Refuses a dump `pg_restore` cannot read.
pub(super) fn check(dump: &Path) -> anyhow::Result<()> {
    let out = Command::new("pg_restore").arg("--list").arg(dump).output();
    succeeded("pg_restore", out).context("its database dump is damaged")
}

/// Loads `dump` into the database at `url` in one transaction (`replace`: dropping what the
/// dump holds first), so a failure leaves the database as it was.
pub(super) fn load(url: &str, dump: &Path, replace: bool) -> anyhow::Result<()> {
    let mut command = tool("pg_restore", url)?;
    command.args([
        "--single-transaction",
        "--exit-on-error",
        "--no-owner",
        "--no-privileges",
    ]);
    if replace {
        command.args(["--clean", "--if-exists"]);
    }
    let config = db::parse_postgres_url(url)?;
    let name = config
        .get_dbname()
        .or(config.get_user())
        .context("SERVICE_DATABASE_URL names no database")?;
    command.arg(format!("--dbname={name}")).arg(dump);
    succeeded("pg_restore", command.output())
}

/// `program` set up to reach the database at `url` through libpq's environment.
fn tool(program: &str, url: &str) -> anyhow::Result<Command> {
    let config = db::parse_postgres_url(url)?;
    let mut command = Command::new(program);
    for variable in [
        "PGHOST",
        "PGPORT",
        "PGUSER",
        "PGPASSWORD",
        "PGDATABASE",
        "PGSSLMODE",
    ] {
        command.env_remove(variable);
    }
    match config.get_hosts().first() {
        Some(Host::Tcp(host)) => command.env("PGHOST", host),
        Some(Host::Unix(path)) => command.env("PGHOST", path),
        None => bail!("SERVICE_DATABASE_URL names no host"),
    };
    if let Some(port) = config.get_ports().first() {
        command.env("PGPORT", port.to_string());
    }
    if let Some(user) = config.get_user() {
        command.env("PGUSER", user);
    }
    if let Some(password) = config.get_password() {
        command.env("PGPASSWORD", String::from_utf8_lossy(password).as_ref());
    }
    if let Some(name) = config.get_dbname() {
        command.env("PGDATABASE", name);
    }
    let mode = match config.get_ssl_mode() {
        SslMode::Disable => "disable",
        SslMode::Require => "require",
        _ => "prefer",
    };
    command.env("PGSSLMODE", mode);
    Ok(command)
}

fn succeeded(program: &str, out: std::io::Result<Output>) -> anyhow::Result<()> {
    succeeded_with(program, out).map(drop)
}

fn succeeded_with(program: &str, out: std::io::Result<Output>) -> anyhow::Result<Output> {
    let out = match out {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{program} is not installed (PostgreSQL's client tools); install them, or copy the \
             database by hand: {}",
            manual_command()
        ),
        Err(e) => bail!("cannot run {program}: {e}"),
    };
    ensure!(
        out.status.success(),
        "{program} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(out)
}
