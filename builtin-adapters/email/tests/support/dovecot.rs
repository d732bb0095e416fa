//! A real Dovecot IMAP server per test: its own configuration, sockets, state and maildir in a
//! temporary folder, listening on a free loopback port without TLS, with one passwd-file user.
//! With TLS, it also offers STARTTLS there and implicit TLS on a second port, with a
//! self-signed certificate for `localhost` made by `openssl`.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_imap::Session;
use async_imap::types::Flag;
use futures_util::TryStreamExt;
use tempfile::TempDir;
use tokio::net::TcpStream;

use super::tool_available;

pub const USER: &str = "bot@example.test";
pub const PASSWORD: &str = "imap-secret-7Q";
const DOVECOT: &str = "/usr/sbin/dovecot";
/// Installed by `dovecot-imapd`; the master alone (`dovecot-core`) serves no IMAP.
const IMAP_SERVICE: &str = "/usr/lib/dovecot/imap";

pub struct Dovecot {
    dir: TempDir,
    child: Child,
    pub port: u16,
    /// The implicit-TLS port, when started with TLS.
    pub tls_port: Option<u16>,
}

/// Whether Dovecot can run here; panics on CI when it cannot.
pub fn available() -> bool {
    tool_available(
        Path::new(DOVECOT).exists() && Path::new(IMAP_SERVICE).exists(),
        "EMAIL TESTS SKIPPED: dovecot is not installed (apt-get install dovecot-imapd)",
    )
}

impl Dovecot {
    pub fn start() -> Self {
        Self::start_with(false)
    }

    pub fn start_with_tls() -> Self {
        Self::start_with(true)
    }

    /// Starts a server and waits until it listens. A port taken between choosing and binding
    /// it (tests run in parallel) is retried with another.
    fn start_with(tls: bool) -> Self {
        let mut last_log = String::new();
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let tls_port = tls.then(free_port);
            write_config(dir.path(), port, tls_port);
            let child = Command::new(DOVECOT)
                .arg("-F")
                .arg("-c")
                .arg(dir.path().join("dovecot.conf"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("run dovecot");
            let mut server = Self {
                dir,
                child,
                port,
                tls_port,
            };
            if server.wait_ready() {
                return server;
            }
            last_log = server.log();
        }
        panic!("dovecot did not start; its log:\n{last_log}");
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return false;
            }
            let listening = |port| std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
            if listening(self.port) && self.tls_port.is_none_or(listening) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("dovecot.log")).unwrap_or_default()
    }

    /// A logged-in session on INBOX, for putting mail in and looking at flags.
    pub async fn session(&self) -> Session<TcpStream> {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        let mut client = async_imap::Client::new(tcp);
        client.read_response().await.unwrap().unwrap();
        let mut session = client.login(USER, PASSWORD).await.map_err(|e| e.0).unwrap();
        session.select("INBOX").await.unwrap();
        session
    }

    /// Delivers a message (with `flags` already set, e.g. `($ServiceClaimed)`); returns its UID.
    pub async fn deliver_flagged(&self, raw: impl AsRef<[u8]>, flags: Option<&str>) -> u32 {
        let mut session = self.session().await;
        session.append("INBOX", flags, None, raw).await.unwrap();
        let uids = session.uid_search("ALL").await.unwrap();
        session.logout().await.unwrap();
        uids.into_iter().max().unwrap()
    }

    pub async fn deliver(&self, raw: impl AsRef<[u8]>) -> u32 {
        self.deliver_flagged(raw, None).await
    }

    /// The flags of message `uid`, as IMAP writes them (`\Answered`, `$ServiceClaimed`...).
    pub async fn flags(&self, uid: u32) -> Vec<String> {
        let mut session = self.session().await;
        let fetches: Vec<_> = session
            .uid_fetch(uid.to_string(), "(UID FLAGS)")
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let flags = fetches
            .iter()
            .find(|f| f.uid == Some(uid))
            .unwrap_or_else(|| panic!("no message {uid}"))
            .flags()
            .map(|flag| match flag {
                Flag::Custom(name) => name.into_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        session.logout().await.unwrap();
        flags
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        // SIGTERM lets the master take its login, auth and imap processes down with it.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Dovecot never gives mail access to root: as root, mail is stored as `nobody`; otherwise
/// everything runs as the current user.
fn users() -> (String, String, String) {
    let id = |flag: &str| {
        let out = Command::new("id").arg(flag).output().unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    if id("-u") == "0" {
        (
            "dovecot".into(),
            "dovenull".into(),
            "uid=nobody gid=nogroup".into(),
        )
    } else {
        let (user, group) = (id("-un"), id("-gn"));
        (
            user.clone(),
            user.clone(),
            format!("uid={user} gid={group}"),
        )
    }
}

/// A self-signed certificate for `localhost` and its key, in `dir`.
fn make_certificate(dir: &Path) {
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stderr(Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success(), "openssl could not make a certificate");
}

fn write_config(dir: &Path, port: u16, tls_port: Option<u16>) {
    let (internal_user, login_user, mail_owner) = users();
    let root = dir.display();
    let (ssl, imaps_listener) = match tls_port {
        Some(tls_port) => {
            make_certificate(dir);
            (
                format!("yes\nssl_cert = <{root}/cert.pem\nssl_key = <{root}/key.pem"),
                format!("address = 127.0.0.1\n    port = {tls_port}"),
            )
        }
        None => ("no".to_owned(), "port = 0".to_owned()),
    };
    let mail = dir.join("mail");
    fs::create_dir(&mail).unwrap();
    // The mail owner (maybe `nobody`) must reach and write the maildir.
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&mail, fs::Permissions::from_mode(0o777)).unwrap();
    fs::write(
        dir.join("passwd"),
        format!("{USER}:{{PLAIN}}{PASSWORD}::::::\n"),
    )
    .unwrap();
    let config = format!(
        r#"protocols = imap
listen = 127.0.0.1
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
default_internal_user = {internal_user}
default_login_user = {login_user}
ssl = {ssl}
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = {root}/passwd
}}
userdb {{
  driver = static
  args = {mail_owner} home={root}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    {imaps_listener}
  }}
}}
"#
    );
    fs::write(dir.join("dovecot.conf"), config).unwrap();
}
