//! A real CalDAV server per test: Radicale (PyPI `radicale`) on a free loopback port, with a
//! temporary storage folder and plain htpasswd users. Without it on this machine the tests
//! that need it say so loudly and pass without running; with `CI=true` that is a failure.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use tempfile::TempDir;

use crate::support::{tool_available, wait};

pub const USER: &str = "ana";
pub const PASSWORD: &str = "radicale-app-password-7";

pub struct Radicale {
    child: Child,
    dir: TempDir,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
}

/// Whether Radicale can run here; panics on CI when it cannot.
pub fn available() -> bool {
    let importable = Command::new("python3")
        .args(["-c", "import radicale"])
        .status()
        .is_ok_and(|status| status.success());
    tool_available(
        importable,
        "CALDAV TESTS SKIPPED: python3 cannot import radicale \
         (python3 -m pip install radicale==3.9.0)",
    )
}

impl Radicale {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let users = dir.path().join("users");
        std::fs::write(&users, format!("{USER}:{PASSWORD}\n")).unwrap();
        let config = dir.path().join("config");
        std::fs::write(
            &config,
            format!(
                "[server]\nhosts = 127.0.0.1:{port}\n\
                 [auth]\ntype = htpasswd\nhtpasswd_filename = {}\nhtpasswd_encryption = plain\ndelay = 0\n\
                 [storage]\nfilesystem_folder = {}\n\
                 [rights]\ntype = owner_only\n\
                 [logging]\nlevel = warning\n",
                users.display(),
                dir.path().join("collections").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("radicale.log")).unwrap();
        let child = Command::new("python3")
            .args(["-m", "radicale", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let radicale = Self {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}"),
        };
        let listening = wait::until_blocking(Duration::from_secs(30), wait::EVERY, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        });
        assert!(
            listening.is_some(),
            "radicale did not listen within 30 s: {}",
            radicale.log()
        );
        radicale
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("radicale.log")).unwrap_or_default()
    }

    /// The user's calendar home, as an operator would configure it.
    pub fn home(&self) -> String {
        format!("{}/{USER}/", self.url)
    }

    async fn send(&self, method: &str, path: &str, content_type: &str, body: String) -> StatusCode {
        reqwest::Client::new()
            .request(
                Method::from_bytes(method.as_bytes()).unwrap(),
                format!("{}{path}", self.url),
            )
            .basic_auth(USER, Some(PASSWORD))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
    }

    /// Creates the calendar `/<user>/<slug>/` named `name`.
    pub async fn mkcalendar(&self, slug: &str, name: &str) {
        let body = format!(
            r#"<?xml version="1.0" encoding="utf-8"?>
<C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">
  <D:set><D:prop><D:displayname>{name}</D:displayname>
    <C:supported-calendar-component-set><C:comp name="VEVENT"/></C:supported-calendar-component-set>
  </D:prop></D:set>
</C:mkcalendar>"#
        );
        let status = self
            .send(
                "MKCALENDAR",
                &format!("/{USER}/{slug}/"),
                "application/xml",
                body,
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{}", self.log());
    }

    /// Stores an event as another CalDAV client would.
    pub async fn put(&self, calendar: &str, uid: &str, ics: String) {
        let path = format!("/{USER}/{calendar}/{uid}.ics");
        let status = self
            .send("PUT", &path, "text/calendar; charset=utf-8", ics)
            .await;
        assert_eq!(status, StatusCode::CREATED, "{}", self.log());
    }

    /// The `.ics` files in Radicale's own storage folder for a calendar.
    pub fn stored(&self, calendar: &str) -> Vec<(PathBuf, String)> {
        let folder = self
            .dir
            .path()
            .join("collections/collection-root")
            .join(USER)
            .join(calendar);
        let mut out: Vec<(PathBuf, String)> = std::fs::read_dir(folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "ics"))
            .map(|p| {
                let text = std::fs::read_to_string(&p).unwrap();
                (p, text)
            })
            .collect();
        out.sort();
        out
    }
}

impl Drop for Radicale {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
