//! Single sign-on with OpenID Connect: the authorization code flow with PKCE, `state` bound to
//! the browser by a cookie, and a `nonce`, through the `openidconnect` crate (discovery, the
//! provider's keys, the ID token's signature, issuer, audience, expiry and nonce). A sign-in in
//! progress lives in the database, so the provider may send the browser back to any replica.
//! People come in with the role their groups map to (`[auth.oidc] roles`).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{Duration, SecondsFormat, Utc};
use futures_util::future::BoxFuture;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use serde::Deserialize;
use serde_json::Value;

use super::credential;
use super::roles::Role;
use crate::db::Conn;
use crate::error::{Error, Result};
use crate::params;

/// The variable holding the client's secret (a public client, PKCE only, without it).
pub const SECRET_VARIABLE: &str = "SERVICE_OIDC_CLIENT_SECRET";
/// The cookie that binds a sign-in's `state` to the browser that started it.
pub const FLOW_COOKIE: &str = "service_sign_in";
/// How long a person has at the provider.
pub const FLOW_LIFE: Duration = Duration::minutes(10);
/// Where the provider sends people back, under the server's public address.
pub const CALLBACK_PATH: &str = "/api/session/oidc/callback";

/// `[auth.oidc]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcSection {
    /// The provider's issuer URL (discovery is at `<issuer>/.well-known/openid-configuration`).
    pub issuer: String,
    pub client_id: String,
    /// Default `["openid", "profile", "email"]` (`openid` is always asked for).
    pub scopes: Option<Vec<String>>,
    /// The ID token's claim holding a person's groups (a string or a list): default `groups`.
    pub role_claim: Option<String>,
    /// The claim a person's name here is taken from: default `preferred_username`, then
    /// `email`, then the subject.
    pub name_claim: Option<String>,
    /// Group → role; a person gets the highest role any of their groups maps to.
    #[serde(default)]
    pub roles: BTreeMap<String, String>,
    /// The role of someone no group maps; unset: they are refused.
    pub default_role: Option<String>,
    /// The sign-in button's words: default `Sign in with single sign-on`.
    pub label: Option<String>,
}

impl OidcSection {
    pub fn check(&self) -> anyhow::Result<()> {
        let issuer = reqwest::Url::parse(&self.issuer).ok();
        if !issuer.is_some_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host()) {
            anyhow::bail!(
                "[auth.oidc] issuer must be an http or https URL, got {:?}",
                self.issuer
            );
        }
        if self.client_id.trim().is_empty() {
            anyhow::bail!("[auth.oidc] client_id must not be empty");
        }
        for (group, role) in &self.roles {
            Role::parse(role, "role").map_err(|e| {
                anyhow::anyhow!("[auth.oidc] roles: the group {group:?} maps to a role that {e}")
            })?;
        }
        if let Some(role) = &self.default_role {
            Role::parse(role, "role")
                .map_err(|e| anyhow::anyhow!("[auth.oidc] default_role: {e}"))?;
        }
        Ok(())
    }

    pub fn label(&self) -> &str {
        self.label
            .as_deref()
            .unwrap_or("Sign in with single sign-on")
    }

    /// The role `groups` give: the highest one mapped, else the default; `None`: refused.
    pub fn role_for(&self, groups: &[String]) -> Option<Role> {
        let mapped = groups
            .iter()
            .filter_map(|group| self.roles.get(group))
            .filter_map(|role| Role::parse(role, "role").ok())
            .max();
        mapped.or_else(|| {
            self.default_role
                .as_deref()
                .and_then(|role| Role::parse(role, "role").ok())
        })
    }
}

/// A sign-in begun: where to send the browser, and the `state` its cookie must carry back.
pub struct Begun {
    pub url: String,
    pub state: String,
}

/// Who the provider says signed in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The issuer and the subject, which together name a person for good.
    pub subject: String,
    pub name: String,
    pub groups: Vec<String>,
}

/// The provider, as this server uses it.
pub struct Provider<'a> {
    pub config: &'a OidcSection,
    pub secret: Option<String>,
    /// Where the provider sends people back: the server's public address and the callback.
    pub redirect: String,
    /// Follows no redirects (one would let a provider's answer reach elsewhere).
    pub http: &'a reqwest::Client,
}

impl Provider<'_> {
    async fn client(
        &self,
    ) -> Result<
        CoreClient<
            openidconnect::EndpointSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointMaybeSet,
            openidconnect::EndpointMaybeSet,
        >,
    > {
        let issuer = IssuerUrl::new(self.config.issuer.clone())
            .map_err(|e| Error::Unavailable(format!("[auth.oidc] issuer: {e}")))?;
        let metadata = CoreProviderMetadata::discover_async(issuer, self.http)
            .await
            .map_err(|e| {
                Error::Unavailable(format!("the identity provider cannot be reached: {e}"))
            })?;
        let redirect = RedirectUrl::new(self.redirect.clone())
            .map_err(|e| Error::Internal(anyhow::anyhow!("the callback URL: {e}")))?;
        Ok(CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(self.config.client_id.clone()),
            self.secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(redirect))
    }

    /// The provider's address to send the browser to, with a fresh `state`, `nonce` and PKCE
    /// challenge, and what the callback needs (to [`keep`]); `next` is where the person lands.
    pub fn begin(&self, next: String) -> BoxFuture<'_, Result<(Begun, Flow)>> {
        Box::pin(async move {
            let client = self.client().await?;
            let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
            let scopes = self
                .config
                .scopes
                .clone()
                .unwrap_or_else(|| vec!["profile".into(), "email".into()]);
            let mut request = client
                .authorize_url(
                    CoreAuthenticationFlow::AuthorizationCode,
                    CsrfToken::new_random,
                    Nonce::new_random,
                )
                .set_pkce_challenge(challenge);
            for scope in scopes.into_iter().filter(|s| s != "openid") {
                request = request.add_scope(Scope::new(scope));
            }
            let (url, state, nonce) = request.url();
            Ok((
                Begun {
                    url: url.to_string(),
                    state: state.secret().clone(),
                },
                Flow {
                    nonce: nonce.secret().clone(),
                    verifier: verifier.secret().clone(),
                    next,
                },
            ))
        })
    }

    /// Exchanges the code for tokens and checks the ID token (signature, issuer, audience,
    /// expiry, nonce); the person it names.
    pub fn finish(&self, code: String, flow: Flow) -> BoxFuture<'_, Result<Identity>> {
        Box::pin(async move {
            let client = self.client().await?;
            let refused =
                |what: String| Error::Forbidden(format!("single sign-on refused: {what}"));
            let tokens = client
                .exchange_code(AuthorizationCode::new(code))
                .map_err(|e| {
                    Error::Unavailable(format!("the provider has no token endpoint: {e}"))
                })?
                .set_pkce_verifier(PkceCodeVerifier::new(flow.verifier))
                .request_async(self.http)
                .await
                .map_err(|e| refused(format!("the provider did not take the code: {e}")))?;
            let token = tokens
                .id_token()
                .ok_or_else(|| refused("the provider sent no ID token".into()))?;
            let claims = token
                .claims(&client.id_token_verifier(), &Nonce::new(flow.nonce))
                .map_err(|e| refused(format!("the ID token is not valid: {e}")))?;
            // Verified above; read as JSON for the configured claims.
            let payload = token
                .to_string()
                .split('.')
                .nth(1)
                .and_then(|part| URL_SAFE_NO_PAD.decode(part).ok())
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
                .unwrap_or_default();
            let subject = claims.subject().as_str().to_owned();
            let name_claim = self
                .config
                .name_claim
                .as_deref()
                .unwrap_or("preferred_username");
            let name = [name_claim, "email"]
                .iter()
                .find_map(|claim| payload[claim].as_str())
                .unwrap_or(&subject)
                .to_owned();
            let groups = match &payload[self.config.role_claim.as_deref().unwrap_or("groups")] {
                Value::String(group) => vec![group.clone()],
                Value::Array(groups) => groups
                    .iter()
                    .filter_map(|g| g.as_str().map(str::to_owned))
                    .collect(),
                _ => Vec::new(),
            };
            Ok(Identity {
                subject: format!("{}|{subject}", self.config.issuer),
                name,
                groups,
            })
        })
    }
}

/// What the callback needs of a sign-in it continues.
#[derive(Debug, Clone)]
pub struct Flow {
    pub nonce: String,
    pub verifier: String,
    /// Where on this server the person goes once signed in.
    pub next: String,
}

/// Keeps a sign-in in progress under its `state`.
pub fn keep(conn: &Conn, state: &str, flow: &Flow) -> Result<()> {
    let expires_at = (Utc::now() + FLOW_LIFE).to_rfc3339_opts(SecondsFormat::Millis, true);
    conn.execute(
        "INSERT INTO sign_in_flows (hash, nonce, verifier, next, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            credential::digest(state),
            flow.nonce,
            flow.verifier,
            flow.next,
            expires_at
        ],
    )?;
    Ok(())
}

/// Takes the sign-in whose `state` this is, once; `None` when unknown, used or expired.
pub fn take(conn: &Conn, state: &str) -> Result<Option<Flow>> {
    let taken = conn.query_opt(
        "DELETE FROM sign_in_flows WHERE hash = ?1 RETURNING nonce, verifier, next, expires_at",
        params![credential::digest(state)],
        |row| {
            let expires_at: String = row.get(3)?;
            Ok((
                Flow {
                    nonce: row.get(0)?,
                    verifier: row.get(1)?,
                    next: row.get(2)?,
                },
                expires_at,
            ))
        },
    )?;
    let now = crate::db::now();
    Ok(taken.and_then(|(flow, expires_at)| (expires_at > now).then_some(flow)))
}

/// Deletes sign-ins nobody came back from.
pub fn trim(conn: &Conn) -> Result<u64> {
    conn.execute(
        "DELETE FROM sign_in_flows WHERE expires_at <= ?1",
        params![crate::db::now()],
    )
}

/// A path on this server to go to after signing in: `/` and what follows, never another
/// site (`//evil.example`, `/\evil.example`, `https://...`).
pub fn check_next(next: &str) -> Result<String> {
    let plain = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.chars().any(|c| c.is_control());
    if !plain || next.len() > 2000 {
        return Err(Error::field(
            "next",
            "next must be a path on this server, such as /#/agents",
        ));
    }
    Ok(next.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    fn section(roles: &[(&str, &str)], default_role: Option<&str>) -> OidcSection {
        OidcSection {
            issuer: "https://idp.example.org".into(),
            client_id: "service-runtime".into(),
            scopes: None,
            role_claim: None,
            name_claim: None,
            roles: roles
                .iter()
                .map(|(g, r)| (g.to_string(), r.to_string()))
                .collect(),
            default_role: default_role.map(str::to_owned),
            label: None,
        }
    }

    #[test]
    fn the_highest_role_a_group_maps_to_wins_else_the_default_else_none() {
        let config = section(&[("sre", "operator"), ("staff", "member")], None);
        assert!(config.check().is_ok());
        let groups = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(
            config.role_for(&groups(&["staff", "sre"])),
            Some(Role::Operator)
        );
        assert_eq!(config.role_for(&groups(&["staff"])), Some(Role::Member));
        assert_eq!(config.role_for(&groups(&["guests"])), None);
        let open = section(&[], Some("viewer"));
        assert_eq!(open.role_for(&[]), Some(Role::Viewer));
        assert!(section(&[("x", "root")], None).check().is_err());
        assert!(section(&[], Some("boss")).check().is_err());
    }

    #[test]
    fn next_stays_on_this_server() {
        assert_eq!(check_next("/#/agents").unwrap(), "/#/agents");
        for bad in [
            "https://evil.example",
            "//evil.example",
            "/\\evil.example",
            "",
            "agents",
        ] {
            assert!(check_next(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_flow_is_taken_once_before_it_expires() {
        each_conn(Backends::Both, |conn| {
            let flow = Flow {
                nonce: "n".into(),
                verifier: "v".into(),
                next: "/".into(),
            };
            keep(conn, "state-1", &flow).unwrap();
            assert_eq!(take(conn, "state-1").unwrap().unwrap().verifier, "v");
            assert!(take(conn, "state-1").unwrap().is_none());
            keep(conn, "state-2", &flow).unwrap();
            conn.execute(
                "UPDATE sign_in_flows SET expires_at = '2000-01-01T00:00:00.000Z'",
                params![],
            )
            .unwrap();
            assert!(take(conn, "state-2").unwrap().is_none());
            keep(conn, "state-3", &flow).unwrap();
            conn.execute(
                "UPDATE sign_in_flows SET expires_at = '2000-01-01T00:00:00.000Z'",
                params![],
            )
            .unwrap();
            assert_eq!(trim(conn).unwrap(), 1);
        });
    }
}
