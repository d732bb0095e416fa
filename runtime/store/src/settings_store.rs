//! The settings store: secrets and other settings, from the environment and from keys written
//! through the API.
//!
//! With SQLite, values are looked up in this order: the process environment, which always
//! wins, then keys written through the API and `<data_dir>/.env` (loaded at start). Writing a
//! key updates `.env` (mode 0600) and takes effect at once unless the process environment sets
//! it, without mutating the process environment, which is unsound in a threaded program.
//!
//! With replicas sharing PostgreSQL, a key written through the API is sealed into the
//! database (see `sealed_settings`) and applies on every replica; the process environment
//! still wins, then those keys, then `.env`.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

use anyhow::Context;

use crate::db::Conn;
use crate::sealed_settings::{self, KEY_VARIABLE, SealKey};

/// The longest value a key write accepts: API keys, tokens and URLs are far shorter, and the
/// value is kept in memory and in `.env`.
pub const MAX_VALUE_BYTES: usize = 4096;

pub struct SettingsStore {
    dotenv: PathBuf,
    overlay: RwLock<HashMap<String, String>>,
    /// Keys written through the API on any replica, with PostgreSQL.
    shared: Option<Shared>,
}

struct Shared {
    /// `SERVICE_SECRET_KEY`: without it nothing is sealed or opened.
    key: Option<SealKey>,
    values: RwLock<HashMap<String, String>>,
}

impl SettingsStore {
    /// Loads `<data_dir>/.env` when present.
    pub fn load(data_dir: &Path) -> anyhow::Result<Self> {
        let dotenv = data_dir.join(".env");
        let mut overlay = HashMap::new();
        match std::fs::read_to_string(&dotenv) {
            Ok(text) => {
                for (name, value) in text.lines().filter_map(parse_line) {
                    if std::env::var_os(name).is_none() {
                        overlay.insert(name.to_owned(), value.to_owned());
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", dotenv.display())),
        }
        Ok(Self {
            dotenv,
            overlay: RwLock::new(overlay),
            shared: None,
        })
    }

    /// Keys written through the API go to the shared database from now on, sealed with
    /// `SERVICE_SECRET_KEY` when it is set (a malformed one is an error).
    pub fn share(&mut self) -> anyhow::Result<()> {
        let key = self
            .get(KEY_VARIABLE)
            .map(|text| SealKey::parse(&text))
            .transpose()?;
        self.shared = Some(Shared {
            key,
            values: RwLock::default(),
        });
        Ok(())
    }

    /// The value of `name`, or `None` when it is unset or empty.
    pub fn get(&self, name: &str) -> Option<String> {
        let overlay = self.overlay.read().unwrap_or_else(PoisonError::into_inner);
        let value = match &self.shared {
            None => std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .or_else(|| overlay.get(name).cloned()),
            Some(shared) => std::env::var(name)
                .ok()
                .or_else(|| read(&shared.values).get(name).cloned())
                .or_else(|| overlay.get(name).cloned()),
        };
        value.filter(|v| !v.is_empty())
    }

    /// Whether the process environment sets `name` (which then wins over written keys).
    pub fn in_process(name: &str) -> bool {
        std::env::var_os(name).is_some_and(|v| !v.is_empty())
    }

    /// Where keys written through the API go.
    pub fn store_name(&self) -> &'static str {
        match self.shared {
            None => ".env",
            Some(_) => "database",
        }
    }

    /// Stores a key written through the API and makes it visible at once: in `.env`, or
    /// sealed in the shared database (refused without `SERVICE_SECRET_KEY`). The caller
    /// validates `value` (no line breaks) and tells the other replicas.
    pub fn write_key(&self, conn: &Conn, name: &str, value: &str) -> crate::error::Result<()> {
        match &self.shared {
            None => Ok(self.write_dotenv(name, value)?),
            Some(shared) => {
                let key = shared
                    .key
                    .as_ref()
                    .ok_or_else(sealed_settings::key_missing)?;
                sealed_settings::store(conn, key, name, value)?;
                write_lock(&shared.values).insert(name.to_owned(), value.to_owned());
                Ok(())
            }
        }
    }

    /// Re-reads the keys written through the API on any replica (with PostgreSQL). Returns
    /// the names whose value changed.
    pub fn reload_shared(&self, conn: &Conn) -> crate::error::Result<BTreeSet<String>> {
        let Some(shared) = &self.shared else {
            return Ok(BTreeSet::new());
        };
        let Some(key) = &shared.key else {
            let stored = sealed_settings::count(conn)?;
            if stored > 0 {
                tracing::warn!(
                    stored,
                    "keys written through the API are stored sealed, but {KEY_VARIABLE} is not \
                     set on this replica: they do not apply here"
                );
            }
            return Ok(BTreeSet::new());
        };
        let (values, unreadable) = sealed_settings::load(conn, key)?;
        if !unreadable.is_empty() {
            tracing::warn!(
                ?unreadable,
                "these keys were sealed with another {KEY_VARIABLE}: they do not apply here"
            );
        }
        let mut current = write_lock(&shared.values);
        let changed = values
            .iter()
            .filter(|(name, value)| current.get(*name) != Some(value))
            .map(|(name, _)| name)
            .chain(current.keys().filter(|name| !values.contains_key(*name)))
            .cloned()
            .collect();
        *current = values;
        Ok(changed)
    }

    pub fn is_set(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Every set variable whose name starts with `prefix` and ends with `suffix`, with its
    /// value as [`SettingsStore::get`] sees it, sorted by name.
    pub fn matching(&self, prefix: &str, suffix: &str) -> Vec<(String, String)> {
        let mut names: Vec<String> = {
            let overlay = self.overlay.read().unwrap_or_else(PoisonError::into_inner);
            let shared: Vec<String> = self
                .shared
                .as_ref()
                .map(|s| read(&s.values).keys().cloned().collect())
                .unwrap_or_default();
            overlay
                .keys()
                .cloned()
                .chain(shared)
                .chain(std::env::vars_os().filter_map(|(name, _)| name.into_string().ok()))
                .filter(|name| name.starts_with(prefix) && name.ends_with(suffix))
                .collect()
        };
        names.sort();
        names.dedup();
        names
            .into_iter()
            .filter_map(|name| {
                let value = self.get(&name)?;
                Some((name, value))
            })
            .collect()
    }

    /// Stores `name=value` in `.env` (other lines kept) and makes it visible at once; commands
    /// run on the data directory write there too. The caller validates `value` (no line breaks).
    pub fn write_dotenv(&self, name: &str, value: &str) -> anyhow::Result<()> {
        let mut overlay = self.overlay.write().unwrap_or_else(PoisonError::into_inner);
        let existing = match std::fs::read_to_string(&self.dotenv) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", self.dotenv.display()));
            }
        };
        let line = format!("{name}=\"{value}\"");
        let mut replaced = false;
        let mut lines: Vec<&str> = Vec::new();
        for current in existing.lines() {
            if parse_line(current).is_some_and(|(n, _)| n == name) {
                if !replaced {
                    lines.push(&line);
                    replaced = true;
                }
            } else {
                lines.push(current);
            }
        }
        if !replaced {
            lines.push(&line);
        }
        let mut text = lines.join("\n");
        text.push('\n');

        // Written to a private temporary file and renamed, so a crash never leaves half a file
        // and the secret is never readable by others, not even briefly.
        let tmp = self.dotenv.with_extension("tmp");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.dotenv)
            .with_context(|| format!("cannot replace {}", self.dotenv.display()))?;
        overlay.insert(name.to_owned(), value.to_owned());
        Ok(())
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl service_contract::Secrets for SettingsStore {
    fn get(&self, name: &str) -> Option<String> {
        SettingsStore::get(self, name)
    }
}

/// Parses `NAME=value`, `export NAME=value` and one pair of surrounding quotes; skips blank
/// lines and comments. No escapes or substitution: what is between the quotes is the value.
fn parse_line(line: &str) -> Option<(&str, &str)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let line = line.strip_prefix("export ").unwrap_or(line);
    let (name, value) = line.split_once('=')?;
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    let value = value.trim();
    let unquoted = ['"', '\'']
        .into_iter()
        .find_map(|q| value.strip_prefix(q)?.strip_suffix(q))
        .filter(|_| value.len() >= 2);
    Some((name, unquoted.unwrap_or(value)))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn parses_common_forms() {
        assert_eq!(parse_line("A=1"), Some(("A", "1")));
        assert_eq!(
            parse_line("export B = 'two words' "),
            Some(("B", "two words"))
        );
        assert_eq!(parse_line("C=\"\"x\"\""), Some(("C", "\"x\"")));
        assert_eq!(parse_line("# A=1"), None);
        assert_eq!(parse_line("nonsense"), None);
    }

    #[test]
    fn write_keeps_other_lines_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        std::fs::write(&path, "# keys\nSVC_TEST_KEEP=1\nSVC_TEST_KEY=old\n").unwrap();
        let env = SettingsStore::load(dir.path()).unwrap();
        assert_eq!(env.get("SVC_TEST_KEY").as_deref(), Some("old"));
        env.write_dotenv("SVC_TEST_KEY", "new \"quoted\" value")
            .unwrap();
        env.write_dotenv("SVC_TEST_OTHER", "x").unwrap();
        assert_eq!(
            env.get("SVC_TEST_KEY").as_deref(),
            Some("new \"quoted\" value")
        );

        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# keys\nSVC_TEST_KEEP=1\n"), "{text}");
        assert_eq!(text.matches("SVC_TEST_KEY=").count(), 1);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let reloaded = SettingsStore::load(dir.path()).unwrap();
        assert_eq!(
            reloaded.get("SVC_TEST_KEY").as_deref(),
            Some("new \"quoted\" value")
        );
        assert_eq!(reloaded.get("SVC_TEST_KEEP").as_deref(), Some("1"));
    }
}
