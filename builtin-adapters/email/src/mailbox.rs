//! The IMAP side: one logged-in session on the configured mailbox, and the few commands the
//! adapter needs. The handled state lives on the messages themselves, as flags, so it survives
//! restarts and needs no store of its own:
//!
//! - [`CLAIMED_KEYWORD`] is set before the agent runs on a message;
//! - `\Answered` is set once the SMTP server has accepted the reply;
//! - [`SKIPPED_KEYWORD`] marks a message the adapter decided not to answer (automated, not allowed,
//!   too big...).
//!
//! Work is every message without `\Answered` or [`SKIPPED_KEYWORD`]: a message claimed but never
//! answered (the process died, or was stopped, in between) is simply taken again.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_imap::types::{Fetch, Flag};
use async_imap::{Client, Session};
use chrono::{Days, Utc};
use futures_util::TryStreamExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::config::{Config, PASSWORD, Security, USERNAME};
use crate::failure::{Failure, Kind, with_causes};
use crate::tls;

/// The keyword set on a message before its agent runs.
pub const CLAIMED_KEYWORD: &str = "$ServiceClaimed";
/// The keyword on a message that will not be answered.
pub const SKIPPED_KEYWORD: &str = "$ServiceSkipped";

/// How long one command may take before the connection is given up.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// A message waiting to be handled, before its content is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiting {
    pub uid: u32,
    pub size: u32,
    /// An earlier attempt claimed it and never finished.
    pub claimed: bool,
}

/// A mark the adapter leaves on a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Claimed,
    Answered,
    Skipped,
}

impl Mark {
    fn flag(self) -> &'static str {
        match self {
            Self::Claimed => CLAIMED_KEYWORD,
            Self::Answered => "\\Answered",
            Self::Skipped => SKIPPED_KEYWORD,
        }
    }
}

pub struct Mailbox {
    session: Session<Stream>,
    /// Identifies this mailbox's UID numbering; a change means every UID was reassigned.
    pub uid_validity: u32,
}

impl Mailbox {
    /// Connects, logs in and selects the configured mailbox.
    pub async fn open(config: &Config) -> Result<Self, Failure> {
        let server = &config.imap;
        let tcp = timed(
            TcpStream::connect((server.host.as_str(), server.port)),
            &format!("reach the IMAP server {server}"),
        )
        .await?;
        let stream = match server.security {
            Security::Tls => Stream::Tls(Box::new(tls::secure(tcp, &server.host).await?)),
            Security::StartTls => {
                let mut client = Client::new(tcp);
                greeting(&mut client).await?;
                timed(
                    client.run_command_and_check_ok("STARTTLS", None),
                    "upgrade to TLS (STARTTLS)",
                )
                .await?;
                let tcp = client.into_inner();
                Stream::Tls(Box::new(tls::secure(tcp, &server.host).await?))
            }
            Security::None => Stream::Plain(tcp),
        };
        if login_would_be_logged() {
            return Err(Failure::new(
                Kind::Config,
                "RUST_LOG turns on trace logs of async_imap, which print the IMAP login with the \
                 password; the adapter does not log in while they are on (lower them, e.g. \
                 RUST_LOG=trace,async_imap=debug)",
            ));
        }
        let mut client = Client::new(stream);
        // After STARTTLS the server sends no second greeting.
        if server.security != Security::StartTls {
            greeting(&mut client).await?;
        }
        let login = tokio::time::timeout(
            COMMAND_TIMEOUT,
            client.login(&config.username, config.password.expose()),
        )
        .await
        .map_err(|_| timed_out("log in"))?;
        let mut session = login.map_err(|(error, _client)| login_failed(config, &error))?;
        let selected = timed(
            session.select(&config.mailbox),
            &format!("open the mailbox {:?}", config.mailbox),
        )
        .await?;
        // The keywords must stay on the messages (`\*`: new ones may be created), or every
        // restart would answer everything again.
        let permanent = &selected.permanent_flags;
        let keeps_keywords = permanent.is_empty()
            || permanent.contains(&Flag::MayCreate)
            || [CLAIMED_KEYWORD, SKIPPED_KEYWORD]
                .iter()
                .all(|keyword| permanent.contains(&Flag::Custom((*keyword).into())));
        if !keeps_keywords {
            return Err(Failure::new(
                Kind::Config,
                format!(
                    "the mailbox {:?} cannot store keywords such as {CLAIMED_KEYWORD}, so handled mail \
                     cannot be marked; use another mailbox or server",
                    config.mailbox
                ),
            ));
        }
        let uid_validity = selected.uid_validity.ok_or_else(|| {
            Failure::new(
                Kind::Imap,
                "the server gives no UIDVALIDITY for the mailbox",
            )
        })?;
        Ok(Self {
            session,
            uid_validity,
        })
    }

    /// UIDs of the messages not yet answered or skipped, oldest first, among those received in
    /// the last `max_age_days` days.
    pub async fn unhandled(&mut self, max_age_days: u32) -> Result<Vec<u32>, Failure> {
        let since = Utc::now()
            .date_naive()
            .checked_sub_days(Days::new(u64::from(max_age_days)))
            .unwrap_or_default()
            .format("%d-%b-%Y");
        let query = format!("UNDELETED UNANSWERED UNKEYWORD {SKIPPED_KEYWORD} SINCE {since}");
        let mut uids: Vec<u32> = timed(self.session.uid_search(query), "search the mailbox")
            .await?
            .into_iter()
            .collect();
        uids.sort_unstable();
        Ok(uids)
    }

    /// Size and claim of each message in `uids`, in the same order.
    pub async fn waiting(&mut self, uids: &[u32]) -> Result<Vec<Waiting>, Failure> {
        if uids.is_empty() {
            return Ok(Vec::new());
        }
        let fetches = self
            .fetch_all(uids, "(UID RFC822.SIZE FLAGS)", "read message sizes")
            .await?;
        let mut waiting: Vec<Waiting> = fetches
            .iter()
            .filter_map(|fetch| {
                Some(Waiting {
                    uid: fetch.uid?,
                    size: fetch.size?,
                    claimed: fetch
                        .flags()
                        .any(|flag| matches!(flag, Flag::Custom(name) if name == CLAIMED_KEYWORD)),
                })
            })
            .collect();
        waiting.sort_unstable_by_key(|w| w.uid);
        Ok(waiting)
    }

    /// The whole message, without marking it `\Seen`.
    pub async fn content(&mut self, uid: u32) -> Result<Vec<u8>, Failure> {
        let fetches = self
            .fetch_all(&[uid], "BODY.PEEK[]", "fetch a message")
            .await?;
        fetches
            .iter()
            .find(|fetch| fetch.uid == Some(uid))
            .and_then(|fetch| fetch.body().map(<[u8]>::to_vec))
            .ok_or_else(|| {
                Failure::new(
                    Kind::Imap,
                    format!("message {uid} vanished before it could be read"),
                )
            })
    }

    pub async fn mark(&mut self, uid: u32, mark: Mark) -> Result<(), Failure> {
        let action = format!("mark message {uid} {}", mark.flag());
        let query = format!("+FLAGS.SILENT ({})", mark.flag());
        let store = async {
            let updates = self.session.uid_store(uid.to_string(), query).await?;
            updates.try_collect::<Vec<_>>().await.map(drop)
        };
        timed(store, &action).await
    }

    /// Says goodbye; the connection is dropped either way.
    pub async fn close(mut self) {
        if let Err(failure) = timed(self.session.logout(), "log out").await {
            tracing::debug!(adapter = crate::NAME, "{failure}");
        }
    }

    async fn fetch_all(
        &mut self,
        uids: &[u32],
        query: &str,
        action: &str,
    ) -> Result<Vec<Fetch>, Failure> {
        let set = uids
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let fetch = async {
            let fetches = self.session.uid_fetch(set, query).await?;
            fetches.try_collect::<Vec<_>>().await
        };
        timed(fetch, action).await
    }
}

/// async-imap logs every command it sends at trace level (through the `log` crate), the LOGIN
/// with its password included.
fn login_would_be_logged() -> bool {
    log::log_enabled!(target: "async_imap::imap_stream", log::Level::Trace)
}

async fn greeting(client: &mut Client<impl ImapIo>) -> Result<(), Failure> {
    match timed(client.read_response(), "read the server greeting").await? {
        Some(_) => Ok(()),
        None => Err(Failure::new(
            Kind::Connection,
            "the IMAP server closed the connection before greeting",
        )),
    }
}

fn login_failed(config: &Config, error: &async_imap::error::Error) -> Failure {
    match error {
        async_imap::error::Error::No(reason) | async_imap::error::Error::Bad(reason) => {
            Failure::new(
                Kind::Auth,
                format!(
                    "the IMAP server refused the login of {:?} ({}); check {USERNAME} and \
                     {PASSWORD} (an app password where the provider asks for one), then \
                     restart the adapter",
                    config.username,
                    server_text(reason)
                ),
            )
        }
        other => imap_failure("log in", other),
    }
}

/// Runs one IMAP step within [`COMMAND_TIMEOUT`].
async fn timed<T, E: Into<StepError>>(
    step: impl Future<Output = Result<T, E>>,
    action: &str,
) -> Result<T, Failure> {
    match tokio::time::timeout(COMMAND_TIMEOUT, step).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(match error.into() {
            StepError::Imap(error) => imap_failure(action, &error),
            StepError::Io(error) => Failure::new(
                Kind::Connection,
                format!("could not {action}: {}", with_causes(&error)),
            ),
        }),
        Err(_) => Err(timed_out(action)),
    }
}

fn timed_out(action: &str) -> Failure {
    Failure::new(
        Kind::Connection,
        format!(
            "could not {action}: the IMAP server did not answer within {} s",
            COMMAND_TIMEOUT.as_secs()
        ),
    )
}

/// The two error types IMAP steps fail with.
enum StepError {
    Imap(async_imap::error::Error),
    Io(std::io::Error),
}

impl From<async_imap::error::Error> for StepError {
    fn from(error: async_imap::error::Error) -> Self {
        Self::Imap(error)
    }
}

impl From<std::io::Error> for StepError {
    fn from(error: std::io::Error) -> Self {
        Self::Io(error)
    }
}

fn imap_failure(action: &str, error: &async_imap::error::Error) -> Failure {
    use async_imap::error::Error;
    let (kind, detail) = match error {
        Error::Io(_) | Error::ConnectionLost => (Kind::Connection, with_causes(error)),
        Error::No(reason) | Error::Bad(reason) => (Kind::Imap, server_text(reason).to_owned()),
        _ => (Kind::Imap, with_causes(error)),
    };
    Failure::new(kind, format!("could not {action}: {detail}"))
}

/// async-imap words a NO or BAD answer as `code: ..., info: Some("<text>")`; the server's own
/// text is what a person needs.
fn server_text(reason: &str) -> &str {
    reason
        .split_once("info: Some(\"")
        .and_then(|(_, text)| text.strip_suffix("\")"))
        .unwrap_or(reason)
        .trim()
}

/// What async-imap needs of a connection.
trait ImapIo: AsyncRead + AsyncWrite + Unpin + std::fmt::Debug + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + std::fmt::Debug + Send> ImapIo for T {}

/// A connection with or without TLS, so one session type serves every security setting.
#[derive(Debug)]
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Self::Tls(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Self::Tls(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Self::Tls(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Self::Tls(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_told_in_the_servers_words() {
        assert_eq!(
            server_text(
                r#"code: None, info: Some("[AUTHENTICATIONFAILED] Authentication failed.")"#
            ),
            "[AUTHENTICATIONFAILED] Authentication failed."
        );
        assert_eq!(server_text(" other wording "), "other wording");
    }
}
