//! Settings from the environment. The servers, the login and the adapter's own address are
//! required; everything else has a default. Problems are collected so one error names every
//! variable that needs fixing.

use std::fmt;
use std::time::Duration;

use service_contract::{ConfigProblem, Missing};

use crate::senders::AllowedSenders;

pub const IMAP_HOST: &str = "SERVICE_EMAIL_IMAP_HOST";
pub const IMAP_PORT: &str = "SERVICE_EMAIL_IMAP_PORT";
pub const IMAP_TLS: &str = "SERVICE_EMAIL_IMAP_TLS";
pub const SMTP_HOST: &str = "SERVICE_EMAIL_SMTP_HOST";
pub const SMTP_PORT: &str = "SERVICE_EMAIL_SMTP_PORT";
pub const SMTP_TLS: &str = "SERVICE_EMAIL_SMTP_TLS";
pub const USERNAME: &str = "SERVICE_EMAIL_USERNAME";
pub const PASSWORD: &str = "SERVICE_EMAIL_PASSWORD";
pub const ADDRESS: &str = "SERVICE_EMAIL_ADDRESS";
pub const MAILBOX: &str = "SERVICE_EMAIL_MAILBOX";
pub const POLL_SECS: &str = "SERVICE_EMAIL_POLL_SECS";
pub const AGENT_PROFILE: &str = "SERVICE_EMAIL_AGENT_PROFILE";
pub const ALLOWED_SENDERS: &str = "SERVICE_EMAIL_ALLOWED_SENDERS";
pub const MAX_MESSAGE_BYTES: &str = "SERVICE_EMAIL_MAX_MESSAGE_BYTES";
pub const MAX_PER_POLL: &str = "SERVICE_EMAIL_MAX_PER_POLL";
pub const MAX_PROMPT_CHARS: &str = "SERVICE_EMAIL_MAX_PROMPT_CHARS";
pub const MAX_AGE_DAYS: &str = "SERVICE_EMAIL_MAX_AGE_DAYS";

/// Every setting, for `describe` and the host (which restarts the adapter when one is written).
pub const SETTINGS: [&str; 17] = [
    IMAP_HOST,
    IMAP_PORT,
    IMAP_TLS,
    SMTP_HOST,
    SMTP_PORT,
    SMTP_TLS,
    USERNAME,
    PASSWORD,
    ADDRESS,
    MAILBOX,
    POLL_SECS,
    AGENT_PROFILE,
    ALLOWED_SENDERS,
    MAX_MESSAGE_BYTES,
    MAX_PER_POLL,
    MAX_PROMPT_CHARS,
    MAX_AGE_DAYS,
];

pub const DEFAULT_MAILBOX: &str = "INBOX";
pub const DEFAULT_PROFILE: &str = "default";
pub const DEFAULT_POLL_SECS: u64 = 60;
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 10 * 1024 * 1024;
pub const DEFAULT_MAX_PER_POLL: u64 = 10;
pub const DEFAULT_MAX_PROMPT_CHARS: u64 = 8_000;
pub const DEFAULT_MAX_AGE_DAYS: u64 = 3;

/// How a connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// TLS from the first byte (IMAPS 993, SMTPS 465).
    Tls,
    /// Plain first, then upgraded with STARTTLS before anything else is sent.
    StartTls,
    /// No encryption: only allowed to a loopback host (a local bridge or test server).
    None,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub host: String,
    pub port: u16,
    pub security: Security,
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The password. It never shows in `Debug`, and [`Password::scrub`] takes it out of any text
/// that is about to be logged or recorded (a server may quote what it was sent).
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn scrub(&self, text: &str) -> String {
        text.replace(&self.0, "<password>")
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<password>")
    }
}

/// What a sender can make the adapter fetch, parse and hand to a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bigger messages are skipped unread.
    pub max_message_bytes: u32,
    /// Messages taken in one poll; a full batch is followed by another poll at once.
    pub max_per_poll: usize,
    /// Characters of a body that reach the prompt.
    pub max_prompt_chars: usize,
    /// Older messages are left alone, so a first start does not answer a whole archive.
    pub max_age_days: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub imap: Server,
    pub smtp: Server,
    pub username: String,
    pub password: Password,
    /// Its own address: the From of every reply, and mail from it is never answered.
    pub address: String,
    pub mailbox: String,
    pub poll: Duration,
    pub profile: String,
    pub allowed: AllowedSenders,
    pub limits: Limits,
}

impl Config {
    /// Reads the settings through `get` (unset and empty are both `None`). `Err` names every
    /// problem found: the missing settings alone, or every problem when one is wrong.
    pub fn from_secrets(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigProblem> {
        let mut problems = Problems::default();
        let text = |name: &str| {
            get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };

        let imap = problems.server(&text, IMAP_HOST, IMAP_PORT, IMAP_TLS, [993, 143, 143]);
        let smtp = problems.server(&text, SMTP_HOST, SMTP_PORT, SMTP_TLS, [465, 587, 25]);
        let username = problems.required(text(USERNAME), USERNAME);
        // Spaces can be part of a password, so it is taken as given.
        let password = problems.required(get(PASSWORD).filter(|p| !p.is_empty()), PASSWORD);
        let address = match text(ADDRESS) {
            Some(address) => problems.check(address_problem(&address), address),
            None => match &username {
                Some(username) if address_problem(username).is_none() => Some(username.clone()),
                // Already named as missing.
                None => None,
                Some(_) => problems.add(format!(
                    "{ADDRESS} is not set (and {USERNAME} is not an address to use instead)"
                )),
            },
        };
        let allowed = match AllowedSenders::parse(text(ALLOWED_SENDERS).as_deref()) {
            Ok(allowed) => Some(allowed),
            Err(problem) => problems.add(format!("{ALLOWED_SENDERS}: {problem}")),
        };
        let mut number =
            |name: &str, default: u64, max: u64| problems.number(text(name), name, default, max);
        let poll_secs = number(POLL_SECS, DEFAULT_POLL_SECS, 86_400);
        let max_message_bytes = number(
            MAX_MESSAGE_BYTES,
            DEFAULT_MAX_MESSAGE_BYTES,
            u64::from(u32::MAX),
        );
        let max_per_poll = number(MAX_PER_POLL, DEFAULT_MAX_PER_POLL, 1_000);
        let max_prompt_chars = number(MAX_PROMPT_CHARS, DEFAULT_MAX_PROMPT_CHARS, 1_000_000);
        let max_age_days = number(MAX_AGE_DAYS, DEFAULT_MAX_AGE_DAYS, 3_650);

        let (Some(imap), Some(smtp), Some(username), Some(password), Some(address), Some(allowed)) =
            (imap, smtp, username, password, address, allowed)
        else {
            return Err(problems.into_problem());
        };
        if !problems.said.is_empty() {
            return Err(problems.into_problem());
        }
        // The bounds above make every conversion below lossless.
        let limits = Limits {
            max_message_bytes: u32::try_from(max_message_bytes).unwrap_or(u32::MAX),
            max_per_poll: usize::try_from(max_per_poll).unwrap_or(usize::MAX),
            max_prompt_chars: usize::try_from(max_prompt_chars).unwrap_or(usize::MAX),
            max_age_days: u32::try_from(max_age_days).unwrap_or(u32::MAX),
        };
        Ok(Self {
            imap,
            smtp,
            username,
            password: Password(password),
            address,
            mailbox: text(MAILBOX).unwrap_or_else(|| DEFAULT_MAILBOX.to_owned()),
            poll: Duration::from_secs(poll_secs),
            // Exact match: profile names are not trimmed or case-folded.
            profile: get(AGENT_PROFILE)
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| DEFAULT_PROFILE.to_owned()),
            allowed,
            limits,
        })
    }
}

/// Why `address` cannot be the adapter's own address, if it cannot.
fn address_problem(address: &str) -> Option<String> {
    address
        .parse::<lettre::Address>()
        .err()
        .map(|_| format!("{ADDRESS} must be an email address, got {address:?}"))
}

/// Every problem found, in order, and the names of the settings among them that are only
/// missing.
#[derive(Default)]
struct Problems {
    said: Vec<String>,
    missing: Vec<String>,
}

impl Problems {
    /// Records a problem; returns `None` so a caller can use it as the missing value.
    fn add<T>(&mut self, problem: String) -> Option<T> {
        self.said.push(problem);
        None
    }

    fn into_problem(self) -> ConfigProblem {
        if self.said.len() == self.missing.len() {
            ConfigProblem::Missing(Missing::All(self.missing))
        } else {
            ConfigProblem::Invalid(self.said.join("; "))
        }
    }

    fn check<T>(&mut self, problem: Option<String>, value: T) -> Option<T> {
        match problem {
            Some(problem) => self.add(problem),
            None => Some(value),
        }
    }

    fn required(&mut self, value: Option<String>, name: &str) -> Option<String> {
        if value.is_none() {
            self.missing.push(name.to_owned());
        }
        value.or_else(|| self.add(format!("{name} is not set")))
    }

    /// A whole number from 1 to `max`, or `default` when unset.
    fn number(&mut self, value: Option<String>, name: &str, default: u64, max: u64) -> u64 {
        let Some(value) = value else {
            return default;
        };
        match value.parse::<u64>() {
            Ok(n) if (1..=max).contains(&n) => n,
            _ => {
                self.said.push(format!(
                    "{name} must be a whole number from 1 to {max}, got {value:?}"
                ));
                default
            }
        }
    }

    /// A server: its host (required), its security (`tls` by default) and its port (by default
    /// the usual one for that security: `ports` is for tls, starttls, none).
    fn server(
        &mut self,
        text: &impl Fn(&str) -> Option<String>,
        host_var: &str,
        port_var: &str,
        tls_var: &str,
        ports: [u16; 3],
    ) -> Option<Server> {
        let host = self.required(text(host_var), host_var);
        let security = match text(tls_var).map(|v| v.to_ascii_lowercase()).as_deref() {
            None | Some("tls") => Some(Security::Tls),
            Some("starttls") => Some(Security::StartTls),
            Some("none") => Some(Security::None),
            Some(other) => self.add(format!(
                "{tls_var} must be tls, starttls or none, got {other:?}"
            )),
        };
        let port = match text(port_var) {
            None => None,
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port != 0 => Some(port),
                _ => self.add(format!("{port_var} must be a port number, got {port:?}")),
            },
        };
        let (host, security) = (host?, security?);
        if security == Security::None && !is_loopback(&host) {
            return self.add(format!(
                "{tls_var}=none would send the password unencrypted; it is only allowed for a \
                 loopback host (localhost, 127.0.0.1, ::1), not {host:?}"
            ));
        }
        let default_port = match security {
            Security::Tls => ports[0],
            Security::StartTls => ports[1],
            Security::None => ports[2],
        };
        Some(Server {
            host,
            port: port.unwrap_or(default_port),
            security,
        })
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn problem(vars: &[(&str, &str)]) -> Result<Config, ConfigProblem> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_secrets(|name| vars.get(name).filter(|v| !v.is_empty()).cloned())
    }

    fn parse(vars: &[(&str, &str)]) -> Result<Config, String> {
        problem(vars).map_err(|p| p.to_string())
    }

    const MINIMAL: [(&str, &str); 4] = [
        (IMAP_HOST, "imap.example.com"),
        (SMTP_HOST, "smtp.example.com"),
        (USERNAME, "bot@example.com"),
        (PASSWORD, "app pass word"),
    ];

    #[test]
    fn every_missing_variable_is_named() {
        assert_eq!(
            problem(&[]).unwrap_err(),
            ConfigProblem::Missing(Missing::All(
                [IMAP_HOST, SMTP_HOST, USERNAME, PASSWORD]
                    .map(str::to_owned)
                    .to_vec()
            ))
        );
        let mut vars = MINIMAL.to_vec();
        vars.retain(|(name, _)| *name != PASSWORD);
        assert_eq!(
            parse(&vars).unwrap_err(),
            "SERVICE_EMAIL_PASSWORD is not set"
        );
        // A wrong value beside a missing one: every problem, as an error.
        vars.push((POLL_SECS, "0"));
        assert_eq!(
            problem(&vars).unwrap_err(),
            ConfigProblem::Invalid(
                "SERVICE_EMAIL_PASSWORD is not set; SERVICE_EMAIL_POLL_SECS must be a whole \
                 number from 1 to 86400, got \"0\""
                    .to_owned()
            )
        );
    }

    #[test]
    fn defaults_use_tls_and_the_usual_ports() {
        let config = parse(&MINIMAL).unwrap();
        assert_eq!(
            config.imap,
            Server {
                host: "imap.example.com".to_owned(),
                port: 993,
                security: Security::Tls
            }
        );
        assert_eq!(
            (config.smtp.port, config.smtp.security),
            (465, Security::Tls)
        );
        assert_eq!(
            config.address, "bot@example.com",
            "the username is the address"
        );
        assert_eq!(config.password.expose(), "app pass word", "taken as given");
        assert_eq!(config.mailbox, "INBOX");
        assert_eq!(config.profile, "default");
        assert_eq!(config.poll, Duration::from_secs(60));
        assert_eq!(
            config.limits,
            Limits {
                max_message_bytes: 10_485_760,
                max_per_poll: 10,
                max_prompt_chars: 8_000,
                max_age_days: 3
            }
        );
    }

    #[test]
    fn starttls_and_explicit_settings() {
        let mut vars = MINIMAL.to_vec();
        vars.extend([
            (IMAP_TLS, "STARTTLS"),
            (SMTP_TLS, "starttls"),
            (SMTP_PORT, "2525"),
            (USERNAME, "login-name"),
            (ADDRESS, "Helper@Example.com"),
            (MAILBOX, "Agents/Inbox"),
            (POLL_SECS, "5"),
            (AGENT_PROFILE, "Mail Helper"),
            (MAX_PER_POLL, "3"),
        ]);
        let config = parse(&vars).unwrap();
        assert_eq!(
            (config.imap.port, config.imap.security),
            (143, Security::StartTls)
        );
        assert_eq!(
            (config.smtp.port, config.smtp.security),
            (2525, Security::StartTls)
        );
        assert_eq!(config.address, "Helper@Example.com");
        assert_eq!(config.mailbox, "Agents/Inbox");
        assert_eq!(config.poll, Duration::from_secs(5));
        assert_eq!(config.profile, "Mail Helper");
        assert_eq!(config.limits.max_per_poll, 3);
    }

    #[test]
    fn no_encryption_is_only_for_loopback() {
        let mut vars = MINIMAL.to_vec();
        vars.push((IMAP_TLS, "none"));
        assert_eq!(
            parse(&vars).unwrap_err(),
            "SERVICE_EMAIL_IMAP_TLS=none would send the password unencrypted; it is only \
             allowed for a loopback host (localhost, 127.0.0.1, ::1), not \"imap.example.com\""
        );
        for host in ["127.0.0.1", "localhost", "::1", "[::1]"] {
            let mut vars = vars.clone();
            vars.push((IMAP_HOST, host));
            let config = parse(&vars).unwrap();
            assert_eq!(
                (config.imap.port, config.imap.security),
                (143, Security::None)
            );
        }
    }

    #[test]
    fn bad_values_are_named() {
        let mut vars = MINIMAL.to_vec();
        vars.extend([
            (IMAP_TLS, "ssl"),
            (SMTP_PORT, "99999"),
            (ADDRESS, "not an address"),
            (POLL_SECS, "0"),
            (MAX_PROMPT_CHARS, "lots"),
            (ALLOWED_SENDERS, "friend@example.org, nobody"),
        ]);
        let problems = parse(&vars).unwrap_err();
        for expected in [
            "SERVICE_EMAIL_IMAP_TLS must be tls, starttls or none, got \"ssl\"",
            "SERVICE_EMAIL_SMTP_PORT must be a port number, got \"99999\"",
            "SERVICE_EMAIL_ADDRESS must be an email address, got \"not an address\"",
            "SERVICE_EMAIL_ALLOWED_SENDERS: ",
            "SERVICE_EMAIL_POLL_SECS must be a whole number from 1 to 86400, got \"0\"",
            "SERVICE_EMAIL_MAX_PROMPT_CHARS must be a whole number from 1 to 1000000, got \"lots\"",
        ] {
            assert!(problems.contains(expected), "{expected:?} in {problems:?}");
        }
    }

    #[test]
    fn the_password_never_shows() {
        let config = parse(&MINIMAL).unwrap();
        assert!(!format!("{config:?}").contains("app pass word"));
        assert_eq!(
            config
                .password
                .scrub("server said: bad login app pass word"),
            "server said: bad login <password>"
        );
    }
}
