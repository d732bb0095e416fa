//! Secrets written through the keys API when replicas share a PostgreSQL database: kept in
//! the database sealed with XChaCha20-Poly1305 under `SERVICE_SECRET_KEY` (which every replica
//! gets from its environment, never from the database), so every replica applies them and a
//! copy of the database alone reveals none. The variable's name is bound to its value (as
//! associated data), so a sealed value cannot be moved under another name.

use std::collections::HashMap;

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use crate::db::{self, Conn};
use crate::error::{Error, Result};
use crate::params;

/// The variable holding the key.
pub(crate) const KEY_VARIABLE: &str = "SERVICE_SECRET_KEY";

/// Format version of a sealed value (its first byte).
const VERSION: u8 = 1;
const NONCE_BYTES: usize = 24;

/// What the keys API answers when it cannot seal.
pub(crate) fn key_missing() -> Error {
    Error::conflict(format!(
        "keys written here are stored in the shared database, sealed with {KEY_VARIABLE}, which \
         is not set: generate one with `openssl rand -base64 32`, set it in every replica's \
         environment (or .env) and restart them; or set this variable in the environment instead"
    ))
}

pub(crate) struct SealKey(XChaCha20Poly1305);

impl std::fmt::Debug for SealKey {
    /// Never the key itself.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealKey(..)")
    }
}

impl SealKey {
    /// Reads a key of 32 bytes, in base64 or hex; the error never repeats the value.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let text = text.trim();
        let bytes = if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
            hex::decode(text).ok()
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text))
                .ok()
        };
        match bytes {
            Some(bytes) if bytes.len() == 32 => Ok(Self(XChaCha20Poly1305::new(
                chacha20poly1305::Key::from_slice(&bytes),
            ))),
            _ => anyhow::bail!(
                "{KEY_VARIABLE} must be 32 random bytes in base64 or hex (e.g. the output of \
                 `openssl rand -base64 32`)"
            ),
        }
    }

    fn seal(&self, name: &str, value: &str) -> Vec<u8> {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = self
            .0
            .encrypt(
                &nonce,
                Payload {
                    msg: value.as_bytes(),
                    aad: name.as_bytes(),
                },
            )
            .expect("sealing a value of at most a few KiB cannot fail");
        let mut out = Vec::with_capacity(1 + NONCE_BYTES + sealed.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    fn open(&self, name: &str, sealed: &[u8]) -> Option<String> {
        let (&version, rest) = sealed.split_first()?;
        if version != VERSION || rest.len() < NONCE_BYTES {
            return None;
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_BYTES);
        let plain = self
            .0
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: name.as_bytes(),
                },
            )
            .ok()?;
        String::from_utf8(plain).ok()
    }
}

/// Seals `value` under `name` and stores it (replacing an earlier one).
pub(crate) fn store(conn: &Conn, key: &SealKey, name: &str, value: &str) -> Result<()> {
    conn.execute(
        "INSERT INTO sealed_settings (name, sealed, updated_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (name) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
        params![name, key.seal(name, value), db::now()],
    )?;
    Ok(())
}

/// Every stored value that `key` opens; those it cannot (sealed under another key, damaged)
/// are named in the second list and left out.
pub(crate) fn load(conn: &Conn, key: &SealKey) -> Result<(HashMap<String, String>, Vec<String>)> {
    let rows: Vec<(String, Vec<u8>)> = conn.query(
        "SELECT name, sealed FROM sealed_settings ORDER BY name",
        params![],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut opened = HashMap::new();
    let mut unreadable = Vec::new();
    for (name, sealed) in rows {
        match key.open(&name, &sealed) {
            Some(value) => {
                opened.insert(name, value);
            }
            None => unreadable.push(name),
        }
    }
    Ok((opened, unreadable))
}

/// How many values are stored (to warn when they cannot be opened for want of a key).
pub(crate) fn count(conn: &Conn) -> Result<i64> {
    db::count(conn, "sealed_settings")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    const KEY: &str = "q9b1mL0dV7sJ3kN2pR5tW8yA4cE6gH0jK2mP4rT6vXw=";

    #[test]
    fn keys_are_32_bytes_in_base64_or_hex_and_errors_keep_them_secret() {
        assert!(SealKey::parse(KEY).is_ok());
        assert!(SealKey::parse(&"ab".repeat(32)).is_ok());
        let err = SealKey::parse("hunter2hunter2").unwrap_err().to_string();
        assert!(
            err.contains("32 random bytes") && !err.contains("hunter2"),
            "{err}"
        );
    }

    #[test]
    fn sealed_values_open_only_with_their_key_and_name() {
        let key = SealKey::parse(KEY).unwrap();
        let sealed = key.seal("SERVICE_TEAMCHAT_BOT_TOKEN", "xoxb-1");
        assert!(
            !sealed.windows(6).any(|w| w == b"xoxb-1"),
            "not in the clear"
        );
        assert_eq!(
            key.open("SERVICE_TEAMCHAT_BOT_TOKEN", &sealed).as_deref(),
            Some("xoxb-1")
        );
        assert_eq!(
            key.open("SERVICE_OTHER", &sealed),
            None,
            "bound to its name"
        );
        let other = SealKey::parse(&"ab".repeat(32)).unwrap();
        assert_eq!(other.open("SERVICE_TEAMCHAT_BOT_TOKEN", &sealed), None);
        assert_ne!(
            sealed,
            key.seal("SERVICE_TEAMCHAT_BOT_TOKEN", "xoxb-1"),
            "fresh nonce"
        );
    }

    #[test]
    fn stored_values_load_back_and_foreign_ones_are_named() {
        each_conn(Backends::Both, |conn| {
            let key = SealKey::parse(KEY).unwrap();
            store(conn, &key, "A", "one").unwrap();
            store(conn, &key, "A", "two").unwrap();
            let other = SealKey::parse(&"ab".repeat(32)).unwrap();
            store(conn, &other, "B", "elsewhere").unwrap();
            let (opened, unreadable) = load(conn, &key).unwrap();
            assert_eq!(opened.get("A").map(String::as_str), Some("two"));
            assert_eq!(unreadable, ["B"]);
            assert_eq!(count(conn).unwrap(), 2);
        });
    }
}
