//! A real SMTP server per test: aiosmtpd (`smtp_sink.py`) on a free loopback port, writing each
//! message it accepts to a folder the test reads.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};

use mail_parser::MessageParser;
use tempfile::TempDir;

use super::dovecot::{PASSWORD, USER};
use super::tool_available;

const SCRIPT: &str = include_str!("smtp_sink.py");

pub struct SmtpSink {
    dir: TempDir,
    child: Child,
    pub port: u16,
}

/// Whether aiosmtpd can run here; panics on CI when it cannot.
pub fn available() -> bool {
    let importable = Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .status()
        .is_ok_and(|status| status.success());
    tool_available(
        importable,
        "EMAIL TESTS SKIPPED: python3 cannot import aiosmtpd (pip install aiosmtpd==1.4.6)",
    )
}

/// One accepted message.
#[derive(Debug, Clone)]
pub struct Received {
    pub rcpt_tos: Vec<String>,
    pub raw: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<String> {
        let message = MessageParser::default().parse(&self.raw).unwrap();
        message
            .header_raw(name)
            .map(|value| value.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    pub fn subject(&self) -> String {
        let message = MessageParser::default().parse(&self.raw).unwrap();
        message.subject().unwrap_or_default().to_owned()
    }

    /// The text, with the CRLF line ends of the transfer turned back into `\n`.
    pub fn body(&self) -> String {
        let message = MessageParser::default().parse(&self.raw).unwrap();
        message
            .body_text(0)
            .unwrap_or_default()
            .replace("\r\n", "\n")
    }
}

impl SmtpSink {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind(("127.0.0.1", 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Written out from the binary, so the server's own end-to-end tests can start it too.
        let script = dir.path().join("smtp_sink.py");
        std::fs::write(&script, SCRIPT).unwrap();
        let folder = dir.path().join("received");
        std::fs::create_dir(&folder).unwrap();
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--port", &port.to_string(), "--user", USER])
            .args(["--password", PASSWORD, "--folder"])
            .arg(&folder)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "the SMTP sink did not start");
        Self { dir, child, port }
    }

    /// Every message accepted so far, in order.
    pub fn received(&self) -> Vec<Received> {
        let mut names: Vec<_> = std::fs::read_dir(self.dir.path().join("received"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "eml"))
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|path| {
                let bytes = std::fs::read(path).unwrap();
                let split = bytes.iter().position(|b| *b == b'\n').unwrap();
                let head: serde_json::Value = serde_json::from_slice(&bytes[..split]).unwrap();
                Received {
                    rcpt_tos: serde_json::from_value(head["rcpt_tos"].clone()).unwrap(),
                    raw: bytes[split + 1..].to_vec(),
                }
            })
            .collect()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        // Closing its standard input ends it.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
