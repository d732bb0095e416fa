//! `secrets`: granted environment variables, and HMAC verification against a named secret so
//! signing secrets need not enter the sandbox.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::super::bindings::service::adapter::secrets::Host;
use super::super::state::HostState;

impl HostState {
    /// The value of a granted secret; an ungranted name is recorded as a denial.
    fn granted_secret(&self, name: &str) -> Result<Option<String>, String> {
        if !self.caller.effective.secrets.contains(name) {
            self.caller.deny(&format!("secret {name} is not granted"));
            return Err(format!("secret {name} is not granted"));
        }
        Ok(self.caller.services.env.get(name))
    }
}

/// Constant-time check of a hex HMAC-SHA256 signature.
pub fn verify_hmac(secret: &[u8], message: &[u8], signature_hex: &str) -> bool {
    let Ok(signature) = hex::decode(signature_hex.trim()) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(message);
    mac.verify_slice(&signature).is_ok()
}

impl Host for HostState {
    async fn get(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        Ok(self.granted_secret(&name).ok().flatten())
    }

    async fn is_set(&mut self, name: String) -> wasmtime::Result<bool> {
        Ok(self
            .granted_secret(&name)
            .is_ok_and(|value| value.is_some()))
    }

    async fn verify_hmac_sha256(
        &mut self,
        name: String,
        message: Vec<u8>,
        signature_hex: String,
    ) -> wasmtime::Result<Result<bool, String>> {
        Ok(match self.granted_secret(&name) {
            Ok(Some(secret)) => Ok(verify_hmac(secret.as_bytes(), &message, &signature_hex)),
            Ok(None) => Err(format!("{name} is not set")),
            Err(denied) => Err(denied),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_hex_hmac() {
        // HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog"), a published vector.
        let good = "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8";
        let message = b"The quick brown fox jumps over the lazy dog";
        assert!(verify_hmac(b"key", message, good));
        assert!(!verify_hmac(b"key", message, &good.replace('f', "0")));
        assert!(!verify_hmac(b"key", message, "not hex"));
        assert!(!verify_hmac(b"other", message, good));
    }
}
