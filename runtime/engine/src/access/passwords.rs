//! Local accounts' passwords: argon2id with the crate's defaults (19 MiB, 2 passes, the
//! parameters OWASP recommends), in the PHC string format so the parameters travel with the
//! hash.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use chacha20poly1305::aead::OsRng;

use crate::error::{Error, Result};

/// Characters a password has at least and at most.
pub(crate) const MIN_CHARS: usize = 12;
pub(crate) const MAX_CHARS: usize = 256;

/// Checks a new password against the documented bounds.
pub fn check(password: &str) -> Result<()> {
    let chars = password.chars().count();
    if !(MIN_CHARS..=MAX_CHARS).contains(&chars) {
        return Err(Error::field(
            "password",
            format!("password must be {MIN_CHARS} to {MAX_CHARS} characters, got {chars}"),
        ));
    }
    Ok(())
}

/// The hash to store; costs tens of milliseconds of CPU, so callers run it off the async
/// threads.
pub fn hash(password: &str) -> Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| Error::Internal(anyhow::anyhow!("cannot hash a password: {e}")))
}

/// Whether `password` is the one `stored` was made from (the comparison is constant-time).
pub fn verify(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|parsed| {
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

/// Spends the time of a verification when there is no hash to check, so an unknown name and a
/// wrong password take as long.
pub fn verify_nothing(password: &str) {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let stored = DUMMY.get_or_init(|| hash("not anyone's password").unwrap_or_default());
    verify(password, stored);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let stored = hash("correct horse battery").unwrap();
        assert!(stored.starts_with("$argon2id$"), "{stored}");
        assert!(verify("correct horse battery", &stored));
        assert!(!verify("correct horse batterx", &stored));
        assert!(!verify("correct horse battery", "not a hash"));
        assert_ne!(stored, hash("correct horse battery").unwrap(), "salted");
    }

    #[test]
    fn lengths_are_bounded() {
        assert!(check("short").is_err());
        assert!(check(&"x".repeat(MAX_CHARS + 1)).is_err());
        assert!(check("twelve chars").is_ok());
    }
}
