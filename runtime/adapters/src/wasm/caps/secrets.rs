//! `secrets`: granted environment variables; HMAC verification against a named secret, so a
//! signing secret need not enter the sandbox; and which origins a secret may be sent to in
//! an outbound placeholder (`[secret_origins]`, asked by every import that sends).

use std::collections::{BTreeMap, BTreeSet};

use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::json;
use sha2::Sha256;
use wasmtime::component::Linker;

use super::super::bindings::{latest, v0_1};
use super::super::grants::{LimitKey, Origin, Request};
use super::super::outbound::Failure;
use super::super::state::{Caller, HostState};
use super::{Capability, denied, link_versions};
use latest::service::adapter::secrets::HmacAlgorithm;
use latest::service::adapter::types::Error;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    #[serde(default)]
    secrets: Vec<String>,
    /// Secret name → the only origins an outbound placeholder may send it to: origins, or
    /// `[outbound_env]` variables standing for the origin each grants.
    #[serde(default)]
    secret_origins: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    pub names: BTreeSet<String>,
    /// Granted secrets the component cannot work without.
    pub required: Vec<String>,
    /// Required secrets the grant does not name.
    pub required_ungranted: Vec<String>,
    /// Secrets bound to origins; an unbound secret may go to any granted origin.
    pub origins: BTreeMap<String, BTreeSet<Origin>>,
    /// Secrets bound to `[outbound_env]` variables, until [`Granted::bind_variables`] turns
    /// them into origins.
    variables: BTreeMap<String, Vec<String>>,
}

impl Granted {
    /// Adds the origin each variable binding stands for (`origin_of` answers `None` for a
    /// variable that grants nothing now, which leaves the secret bound to less).
    pub(crate) fn bind_variables(
        &mut self,
        origin_of: impl Fn(&str) -> Result<Option<Origin>, String>,
    ) -> Result<(), String> {
        for (name, variables) in std::mem::take(&mut self.variables) {
            let bound = self.origins.entry(name).or_default();
            for variable in variables {
                bound.extend(origin_of(&variable).map_err(|e| format!("[secret_origins]: {e}"))?);
            }
        }
        Ok(())
    }

    /// Whether a placeholder may send `name` to `origin`.
    pub(crate) fn may_send(&self, name: &str, origin: &Origin) -> bool {
        self.names.contains(name)
            && self
                .origins
                .get(name)
                .is_none_or(|bound| bound.contains(origin))
    }
}

/// The value of a secret an outbound placeholder names, when it may go to `origin`.
pub(crate) fn for_placeholder(
    caller: &Caller,
    name: &str,
    origin: &Origin,
) -> Result<String, Failure> {
    let secrets = &caller.granted.secrets;
    if !secrets.names.contains(name) {
        return Err(Failure::Denied(format!("secret {name} is not granted")));
    }
    if !secrets.may_send(name, origin) {
        return Err(Failure::Denied(format!(
            "secret {name} may not be sent to {origin} ([secret_origins])"
        )));
    }
    caller
        .services
        .env
        .get(name)
        .ok_or_else(|| Failure::Failed(format!("{name} is not set")))
}

pub struct Secrets;

impl Capability for Secrets {
    const INTERFACE: &'static str = "secrets";
    const KEYS: &'static [&'static str] = &["secrets", "secret_origins"];
    const LIMIT_KEYS: &'static [LimitKey] = &[];
    type Grant = Grant;
    type Granted = Granted;
    type State = ();

    fn grant(
        request: &Request,
        grant: &Grant,
        _: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Granted, String> {
        let mut origins = BTreeMap::new();
        let mut variables = BTreeMap::new();
        for (name, bound) in &grant.secret_origins {
            if !grant.secrets.contains(name) {
                return Err(format!(
                    "[secret_origins] names {name}, which `secrets` does not grant"
                ));
            }
            // An origin has a scheme; anything else names a variable.
            let (urls, names): (Vec<String>, Vec<String>) = bound
                .iter()
                .cloned()
                .partition(|entry| entry.contains("://"));
            origins.insert(name.clone(), Origin::parse_all(&urls)?);
            variables.insert(name.clone(), names);
        }
        // A 0.1 component lists the secrets it wants; a newer one may use every granted
        // secret (through this interface or an outbound placeholder).
        let names: BTreeSet<String> = grant
            .secrets
            .iter()
            .filter(|name| {
                request
                    .listed
                    .as_ref()
                    .is_none_or(|listed| listed.secrets.contains(name))
            })
            .cloned()
            .collect();
        let (required, required_ungranted) = request
            .required_secrets
            .iter()
            .cloned()
            .partition(|name| names.contains(name));
        Ok(Granted {
            names,
            required,
            required_ungranted,
            origins,
            variables,
        })
    }

    fn granted_anything(granted: &Granted) -> bool {
        !granted.names.is_empty()
    }

    fn summary(granted: &Granted) -> Vec<String> {
        granted
            .names
            .iter()
            .map(|s| format!("secret:{s}"))
            .collect()
    }

    fn state(_: &Granted) -> anyhow::Result<()> {
        Ok(())
    }

    /// Depends on `outbound_http`: a secret bound to an `[outbound_env]` variable goes to the
    /// origin that variable grants.
    fn settle(
        granted: &mut super::Granted,
        grant: &super::Grant,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), String> {
        granted
            .secrets
            .bind_variables(|variable| grant.outbound_http.env_origin(variable, env))
    }

    fn suggest(request: &Request) -> Vec<String> {
        let listed = request.listed.as_ref().map(|l| l.secrets.clone());
        let names = listed.unwrap_or_else(|| request.required_secrets.clone());
        match names.is_empty() {
            true => vec!["secrets = [\"NAME_OF_THE_VARIABLE\"]".into()],
            false => vec![format!("secrets = {names:?}")],
        }
    }

    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        link_versions!(linker, secrets)
    }
}

impl HostState {
    /// The value of a granted secret; an ungranted name is recorded as a denial.
    fn granted_secret(&self, name: &str) -> Result<Option<String>, Error> {
        if !self.caller.granted.secrets.names.contains(name) {
            return Err(denied(self, format!("secret {name} is not granted")));
        }
        Ok(self.caller.services.env.get(name))
    }
}

/// Constant-time check of an HMAC over `message`.
pub(crate) fn verify_hmac(
    algorithm: HmacAlgorithm,
    secret: &[u8],
    message: &[u8],
    signature: &[u8],
) -> bool {
    fn check<M: Mac + hmac::digest::KeyInit>(
        secret: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> bool {
        let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(secret)
            .expect("HMAC takes keys of any length");
        mac.update(message);
        mac.verify_slice(signature).is_ok()
    }
    match algorithm {
        HmacAlgorithm::Sha1 => check::<Hmac<sha1::Sha1>>(secret, message, signature),
        HmacAlgorithm::Sha256 => check::<Hmac<Sha256>>(secret, message, signature),
    }
}

impl latest::service::adapter::secrets::Host for HostState {
    async fn get(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        let args = self.args(|| json!({"name": name}));
        // A replay gets the name: the value was never recorded.
        if let Some(answer) = self.replayed("secrets.get", &args)? {
            return Ok(answer);
        }
        let value = self.granted_secret(&name).ok().flatten();
        let noted = value.as_ref().map(|_| format!("{{{{secret:{name}}}}}"));
        self.taped("secrets.get", args, &noted);
        Ok(value)
    }

    async fn is_set(&mut self, name: String) -> wasmtime::Result<bool> {
        let args = self.args(|| json!({"name": name}));
        if let Some(answer) = self.replayed("secrets.is-set", &args)? {
            return Ok(answer);
        }
        let set = self
            .granted_secret(&name)
            .is_ok_and(|value| value.is_some());
        self.taped("secrets.is-set", args, &set);
        Ok(set)
    }

    async fn verify_hmac(
        &mut self,
        name: String,
        algorithm: HmacAlgorithm,
        message: Vec<u8>,
        signature: Vec<u8>,
    ) -> wasmtime::Result<Result<bool, Error>> {
        self.heavy(message.len() + signature.len()).await;
        let args = self.args(|| {
            json!({"name": name, "algorithm": algorithm, "message": message, "signature": signature})
        });
        if let Some(answer) = self.replayed("secrets.verify-hmac", &args)? {
            return Ok(answer);
        }
        let verified = match self.granted_secret(&name) {
            Ok(Some(secret)) => Ok(verify_hmac(
                algorithm,
                secret.as_bytes(),
                &message,
                &signature,
            )),
            Ok(None) => Err(Error::Failed(format!("{name} is not set"))),
            Err(denied) => Err(denied),
        };
        self.taped("secrets.verify-hmac", args, &verified);
        Ok(verified)
    }
}

impl v0_1::service::adapter::secrets::Host for HostState {
    async fn get(&mut self, name: String) -> wasmtime::Result<Option<String>> {
        latest::service::adapter::secrets::Host::get(self, name).await
    }

    async fn is_set(&mut self, name: String) -> wasmtime::Result<bool> {
        latest::service::adapter::secrets::Host::is_set(self, name).await
    }

    async fn verify_hmac_sha256(
        &mut self,
        name: String,
        message: Vec<u8>,
        signature_hex: String,
    ) -> wasmtime::Result<Result<bool, String>> {
        // A signature that is not hex cannot match (the 0.1 answer for it was `false`).
        let signature = hex::decode(signature_hex.trim()).unwrap_or_default();
        let verified = latest::service::adapter::secrets::Host::verify_hmac(
            self,
            name,
            HmacAlgorithm::Sha256,
            message,
            signature,
        )
        .await?;
        Ok(verified.map_err(|e| super::trap(e).to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies_published_hmac_vectors() {
        // HMAC("key", "The quick brown fox jumps over the lazy dog"), published vectors.
        let message = b"The quick brown fox jumps over the lazy dog";
        let sha256 =
            hex::decode("f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8")
                .unwrap();
        let sha1 = hex::decode("de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9").unwrap();
        assert!(verify_hmac(HmacAlgorithm::Sha256, b"key", message, &sha256));
        assert!(verify_hmac(HmacAlgorithm::Sha1, b"key", message, &sha1));
        assert!(!verify_hmac(HmacAlgorithm::Sha1, b"key", message, &sha256));
        assert!(!verify_hmac(
            HmacAlgorithm::Sha256,
            b"other",
            message,
            &sha256
        ));
        assert!(!verify_hmac(HmacAlgorithm::Sha256, b"key", message, b""));
    }

    #[test]
    fn bound_secrets_go_to_their_origins_only() {
        let grant = Grant {
            secrets: vec!["BOT".into(), "FREE".into()],
            secret_origins: [("BOT".into(), vec!["https://slack.com".into()])].into(),
        };
        let granted = Secrets::grant(&Request::default(), &grant, &|_| None).unwrap();
        let slack = Origin::parse("https://slack.com:443").unwrap();
        let other = Origin::parse("https://other.example").unwrap();
        assert!(granted.may_send("BOT", &slack) && !granted.may_send("BOT", &other));
        assert!(granted.may_send("FREE", &other));
        assert!(!granted.may_send("NOPE", &slack));
        let unbound = Grant {
            secret_origins: [("X".into(), vec![])].into(),
            ..grant
        };
        assert!(Secrets::grant(&Request::default(), &unbound, &|_| None).is_err());
    }
}
