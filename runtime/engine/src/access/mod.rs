//! Who is calling: principals, their roles and what each may do, and how a request's
//! credentials name one.
//!
//! Two modes, chosen by the bind. Bound to a loopback address (and `[auth] required` not
//! set), whoever reaches the port is this machine's user: the owner, who may do everything,
//! unless the request names someone else with a credential. Bound to any other address, or
//! with `required`, a request without a credential is anonymous and reaches only the routes
//! open to everyone.

pub mod audit;
pub mod budget;
pub mod credential;
pub mod erasure;
pub mod links;
pub mod passwords;
pub(crate) mod roles;
pub mod sessions;
pub mod single_sign_on;
pub mod tokens;
pub mod users;

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::AuthSection;
use crate::db::Db;
use crate::error::Result;
pub use roles::{AgentAccess, Permission, Role};

/// How long a token's or a session's lookup is trusted: one revoked on another replica is
/// refused within this.
const CACHE_FOR: Duration = Duration::from_millis(500);

/// How often a token's or a session's last use is written (a write per request would cost
/// more than the request).
const TOUCH_EVERY: chrono::Duration = chrono::Duration::seconds(60);

/// Who a request comes from.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Principal {
    pub kind: PrincipalKind,
    /// Unique within its kind: a token's name, `owner`, the variable of a shared token.
    pub id: String,
    pub name: String,
    pub role: Role,
    /// A person's groups at the identity provider (agents can be open to groups).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// Who a request comes from, as the HTTP layer names it on every request.
#[derive(Debug, Clone)]
pub enum Caller {
    Anonymous,
    Known(Principal),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    /// This machine's user: a loopback request in local mode, or a command run on the data
    /// directory (it sends the key the server wrote there).
    Owner,
    /// A person signed in (a session cookie).
    User,
    /// An API token.
    Token,
    /// `SERVICE_MCP_TOKEN` or `SERVICE_METRICS_TOKEN`, each for its one endpoint.
    SharedToken,
}

impl Principal {
    pub fn owner() -> Self {
        Self {
            kind: PrincipalKind::Owner,
            id: "owner".into(),
            name: "this machine's user".into(),
            role: Role::Admin,
            groups: Vec::new(),
        }
    }

    /// A shared token of `variable`, holding `role`.
    pub fn shared(variable: &str, role: Role) -> Self {
        Self {
            kind: PrincipalKind::SharedToken,
            id: variable.into(),
            name: variable.into(),
            role,
            groups: Vec::new(),
        }
    }

    /// A person, as a session names them.
    pub fn user(user: users::User) -> Self {
        Self {
            kind: PrincipalKind::User,
            id: user.name.clone(),
            name: user.name,
            role: user.role,
            groups: user.groups,
        }
    }

    /// How records name this principal (`token:ci`, `owner`).
    pub fn label(&self) -> String {
        match self.kind {
            PrincipalKind::Owner => "owner".into(),
            PrincipalKind::User => format!("user:{}", self.id),
            PrincipalKind::Token => format!("token:{}", self.id),
            PrincipalKind::SharedToken => self.id.clone(),
        }
    }

    pub fn may(&self, permission: Permission) -> bool {
        self.role.may(permission)
    }

    /// Whose conversations (and their approvals) this principal may see and act on: everyone's
    /// (`None`) with `manage_conversations`, else only those it started.
    pub fn conversations_scope(&self) -> Option<String> {
        (!self.may(Permission::ManageConversations)).then(|| self.label())
    }

    /// Whether this principal may use an agent whose profile says `access`.
    pub(crate) fn may_use(&self, access: Option<&AgentAccess>) -> bool {
        access.is_none_or(|access| access.admits(self.role, &self.groups))
    }

    /// [`Principal::may_use`] as a 403 naming who the agent `name` is open to.
    pub fn check_agent(&self, name: &str, access: Option<&AgentAccess>) -> Result<()> {
        match access {
            Some(access) if !self.may_use(Some(access)) => {
                let mut open_to: Vec<String> =
                    access.roles.iter().map(|r| format!("role {r}")).collect();
                open_to.extend(access.groups.iter().map(|g| format!("group {g:?}")));
                Err(crate::error::Error::Forbidden(format!(
                    "agent {name:?} is open to admins and {}; {} is not among them",
                    open_to.join(", "),
                    self.label()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether this principal may see and act on a conversation (or read a run) `started_by`
    /// started.
    pub fn may_enter(&self, started_by: Option<&str>) -> bool {
        self.conversations_scope()
            .is_none_or(|own| started_by == Some(own.as_str()))
    }
}

/// Why a credential was refused (401).
#[derive(Debug)]
pub struct Refused(pub &'static str);

struct Cached {
    principal: Option<Principal>,
    at: Instant,
}

/// The server's view of access: its mode and the credentials it accepts.
pub struct Access {
    db: Db,
    required: bool,
    remote_admin: bool,
    runs_per_minute: u32,
    lives: sessions::Lives,
    /// The key this server process writes to its data directory for commands, and its digest.
    local_key: String,
    local_key_digest: String,
    tokens: Mutex<HashMap<String, Cached>>,
}

impl Access {
    /// `loopback`: whether the server listens on a loopback address only.
    pub fn new(db: Db, config: &AuthSection, loopback: bool) -> Self {
        let local_key = format!("{}{}", tokens::PREFIX, credential::random_text());
        Self {
            db,
            required: config.required || !loopback,
            remote_admin: config.remote_admin,
            runs_per_minute: config.runs_per_minute(),
            lives: config.session_lives(),
            local_key_digest: credential::digest(&local_key),
            local_key,
            tokens: Mutex::default(),
        }
    }

    /// Whether a request without a credential needs one (else it is the owner's).
    pub fn sign_in_required(&self) -> bool {
        self.required
    }

    /// `[auth] remote_admin`: the specification's loopback-only endpoints take admins from
    /// other machines too.
    pub fn remote_admin(&self) -> bool {
        self.remote_admin
    }

    /// The key that makes a command on this machine the owner; written to the data directory
    /// (owner-only) while the server runs.
    pub fn local_key(&self) -> &str {
        &self.local_key
    }

    /// The principal a bearer token names.
    pub async fn bearer(&self, secret: &str) -> std::result::Result<Principal, Refused> {
        let digest = credential::digest(secret);
        if same(&digest, &self.local_key_digest) {
            return Ok(Principal::owner());
        }
        let found = self
            .remembered(format!("t{digest}"), self.lookup(secret))
            .await?;
        found.ok_or(Refused(UNKNOWN_TOKEN))
    }

    /// The person a session cookie names.
    pub async fn session(&self, secret: &str) -> std::result::Result<Principal, Refused> {
        let key = format!("s{}", credential::digest(secret));
        let found = self.remembered(key, self.lookup_session(secret)).await?;
        found.ok_or(Refused(
            "the session has ended (signed out, expired or revoked): sign in again",
        ))
    }

    /// How long sessions last.
    pub fn session_lives(&self) -> sessions::Lives {
        self.lives
    }

    /// What `lookup` finds, from the cache while it is fresh.
    async fn remembered(
        &self,
        key: String,
        lookup: impl Future<Output = Result<Option<Principal>>>,
    ) -> std::result::Result<Option<Principal>, Refused> {
        if let Some(cached) = self.cached(&key) {
            return Ok(cached);
        }
        let found = lookup.await.map_err(|e| {
            tracing::warn!("cannot check a credential: {e}");
            Refused("the credential cannot be checked now; try again shortly")
        })?;
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                key,
                Cached {
                    principal: found.clone(),
                    at: Instant::now(),
                },
            );
        Ok(found)
    }

    /// Counts a sign-in attempt from `peer`, for the account `name` when it names one (a
    /// single sign-on start does not); `Err` with the seconds to wait once either made too
    /// many this minute.
    pub async fn spend_sign_in(
        &self,
        name: Option<&str>,
        peer: std::net::IpAddr,
    ) -> Result<std::result::Result<(), u64>> {
        let account = name.map(|name| format!("sign-in:{name}"));
        let address = format!("sign-in@{peer}");
        self.db
            .call(move |conn| {
                let by_account = match account {
                    Some(account) => budget::spend(conn, &account, SIGN_INS_PER_ACCOUNT)?,
                    None => Ok(()),
                };
                let by_address = budget::spend(conn, &address, SIGN_INS_PER_ADDRESS)?;
                Ok(by_account.and(by_address))
            })
            .await
    }

    /// Counts an agent run `principal` starts; `Err` with the seconds to wait once it started
    /// `[auth] runs_per_minute` this minute. The owner's runs are not counted.
    pub async fn spend_run(&self, principal: &Principal) -> Result<std::result::Result<(), u64>> {
        if principal.kind == PrincipalKind::Owner {
            return Ok(Ok(()));
        }
        let (label, limit) = (principal.label(), self.runs_per_minute);
        self.db
            .call(move |conn| budget::spend(conn, &label, limit))
            .await
    }

    pub fn runs_per_minute(&self) -> u32 {
        self.runs_per_minute
    }

    /// Forgets what was looked up, so a token or session revoked here is refused at once.
    pub fn forget(&self) {
        self.tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn cached(&self, key: &str) -> Option<Option<Principal>> {
        let mut cache = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        // Bounded by what was looked up within the last half second.
        cache.retain(|_, cached| now.duration_since(cached.at) < CACHE_FOR);
        cache.get(key).map(|cached| cached.principal.clone())
    }

    async fn lookup(&self, secret: &str) -> Result<Option<Principal>> {
        let secret = secret.to_owned();
        self.db
            .call(move |conn| {
                let now = chrono::Utc::now();
                let Some(token) = tokens::find(conn, &secret)? else {
                    return Ok(None);
                };
                if token.expired(now) {
                    return Ok(None);
                }
                let stale = token
                    .last_used_at
                    .as_deref()
                    .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                    .is_none_or(|at| now - at.to_utc() >= TOUCH_EVERY);
                if stale {
                    tokens::touch(conn, &token.name)?;
                }
                Ok(Some(Principal {
                    kind: PrincipalKind::Token,
                    id: token.name.clone(),
                    name: token.name,
                    role: token.role,
                    groups: Vec::new(),
                }))
            })
            .await
    }

    async fn lookup_session(&self, secret: &str) -> Result<Option<Principal>> {
        let (secret, lives) = (secret.to_owned(), self.lives);
        self.db
            .call(move |conn| {
                let Some(session) = sessions::find(conn, &secret, lives)? else {
                    return Ok(None);
                };
                if chrono::Utc::now() - session.seen_at >= TOUCH_EVERY {
                    sessions::touch(conn, &secret)?;
                }
                Ok(Some(Principal::user(session.user)))
            })
            .await
    }
}

/// Sign-in attempts per minute for one account, and from one address.
pub(crate) const SIGN_INS_PER_ACCOUNT: u32 = 10;
pub(crate) const SIGN_INS_PER_ADDRESS: u32 = 30;

const UNKNOWN_TOKEN: &str = "the token is not valid: unknown, expired or revoked";

/// Compares digests in time that does not depend on where they differ.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0, |acc, (x, y)| acc | (x ^ y))
            == 0
}
