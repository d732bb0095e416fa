//! The SMTP side: replies sent from the adapter's own address, threaded, and marked
//! `Auto-Submitted: auto-replied` so other robots know not to answer them (RFC 3834).

use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::config::{Config, PASSWORD, SMTP_HOST, Security, USERNAME};
use crate::failure::{Failure, Kind, with_causes};
use crate::thread::Threading;

/// How long one SMTP command may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);
/// Permanent SMTP codes that mean the login was refused.
const AUTH_CODES: [&str; 4] = ["530", "534", "535", "538"];

/// A reply, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub to: String,
    pub subject: String,
    pub threading: Threading,
    pub text: String,
}

pub struct Outbox {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    /// The From address's domain, which names the replies' Message-IDs.
    domain: String,
    server: String,
}

impl Outbox {
    pub fn new(config: &Config) -> Result<Self, Failure> {
        let server = &config.smtp;
        let builder = match server.security {
            Security::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&server.host),
            Security::StartTls => {
                AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&server.host)
            }
            Security::None => Ok(AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(
                &server.host,
            )),
        }
        .map_err(|error| {
            Failure::new(
                Kind::Config,
                format!("{SMTP_HOST} {:?} cannot be used: {error}", server.host),
            )
        })?;
        let credentials =
            Credentials::new(config.username.clone(), config.password.expose().to_owned());
        let address: lettre::Address = config.address.parse().map_err(|_| {
            Failure::new(
                Kind::Config,
                format!("{:?} is not an address", config.address),
            )
        })?;
        Ok(Self {
            transport: builder
                .port(server.port)
                .credentials(credentials)
                .timeout(Some(SMTP_TIMEOUT))
                .build(),
            domain: address.domain().to_owned(),
            from: Mailbox::new(None, address),
            server: server.to_string(),
        })
    }

    /// Connects and logs in without sending anything, so no agent runs while replies cannot
    /// go out.
    pub async fn check(&self) -> Result<(), Failure> {
        match self.transport.test_connection().await {
            Ok(true) => Ok(()),
            Ok(false) => Err(Failure::new(
                Kind::Connection,
                format!("the SMTP server {} did not answer a NOOP", self.server),
            )),
            Err(error) => Err(self.failure("log in to", &error)),
        }
    }

    /// Sends `reply`. A [`Kind::Smtp`] failure is the server refusing this reply for good;
    /// anything else may work on another try.
    pub async fn send(&self, reply: &Reply) -> Result<(), Failure> {
        let message = self.compose(reply)?;
        self.transport
            .send(message)
            .await
            .map(drop)
            .map_err(|error| self.failure("send a reply through", &error))
    }

    fn compose(&self, reply: &Reply) -> Result<Message, Failure> {
        let refused = |what: String| Failure::new(Kind::Smtp, what);
        let to: Mailbox = reply
            .to
            .parse()
            .map_err(|_| refused(format!("{:?} is not an address to reply to", reply.to)))?;
        let mut builder = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(reply.subject.clone())
            .message_id(Some(format!("<{}@{}>", uuid::Uuid::new_v4(), self.domain)))
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("Auto-Submitted"),
                "auto-replied".to_owned(),
            ))
            .header(ContentType::TEXT_PLAIN);
        if let Some(id) = &reply.threading.in_reply_to {
            builder = builder.in_reply_to(id.clone());
        }
        if let Some(ids) = &reply.threading.references {
            builder = builder.references(ids.clone());
        }
        builder
            .body(reply.text.clone())
            .map_err(|error| refused(format!("the reply could not be composed: {error}")))
    }

    fn failure(&self, action: &str, error: &lettre::transport::smtp::Error) -> Failure {
        let detail = with_causes(error);
        let code = error.status().map(|code| code.to_string());
        if error.is_permanent() && code.is_some_and(|code| AUTH_CODES.contains(&code.as_str())) {
            return Failure::new(
                Kind::Auth,
                format!(
                    "the SMTP server {} refused the login ({detail}); check {USERNAME} and \
                     {PASSWORD} (an app password where the provider asks for one), then restart \
                     the adapter",
                    self.server
                ),
            );
        }
        let kind = if error.is_tls() {
            Kind::Tls
        } else if error.is_permanent() {
            Kind::Smtp
        } else {
            Kind::Connection
        };
        Failure::new(
            kind,
            format!(
                "could not {action} the SMTP server {}: {detail}",
                self.server
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox() -> Outbox {
        let vars = [
            ("SERVICE_EMAIL_IMAP_HOST", "127.0.0.1"),
            ("SERVICE_EMAIL_SMTP_HOST", "127.0.0.1"),
            ("SERVICE_EMAIL_SMTP_TLS", "none"),
            ("SERVICE_EMAIL_USERNAME", "bot@example.org"),
            ("SERVICE_EMAIL_PASSWORD", "pw"),
        ];
        let config = Config::from_secrets(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
        .unwrap();
        Outbox::new(&config).unwrap()
    }

    #[test]
    fn a_reply_is_threaded_marked_automatic_and_folded() {
        let references: Vec<String> = (0..10)
            .map(|n| format!("<{n}{}@x>", "i".repeat(240)))
            .collect();
        let reply = Reply {
            to: "Alice <alice@example.org>".to_owned(),
            subject: "Re: Café".to_owned(),
            threading: Threading {
                in_reply_to: Some("<m1@example.org>".to_owned()),
                references: Some(references.join(" ")),
            },
            text: "Bonjour, café à 10h.".to_owned(),
        };
        let message = outbox().compose(&reply).unwrap();
        let text = String::from_utf8(message.formatted()).unwrap();
        for header in [
            "From: bot@example.org\r\n",
            "To: Alice <alice@example.org>\r\n",
            "In-Reply-To: <m1@example.org>\r\n",
            "Auto-Submitted: auto-replied\r\n",
            "Content-Type: text/plain; charset=utf-8\r\n",
        ] {
            assert!(text.contains(header), "{header:?} in {text}");
        }
        assert!(text.contains("Message-ID: <"), "{text}");
        assert!(text.contains("@example.org>\r\n"), "{text}");
        assert!(text.lines().all(|line| line.len() <= 998), "{text}");
        let parsed = mail_parser::MessageParser::default()
            .parse(text.as_bytes())
            .unwrap();
        assert_eq!(parsed.subject(), Some("Re: Café"));
        assert_eq!(parsed.references().as_text_list().map(<[_]>::len), Some(10));
        assert_eq!(parsed.body_text(0).as_deref(), Some("Bonjour, café à 10h."));
    }
}
