//! Another machine on this one: a network namespace joined to the host by a veth pair, so a
//! test can call a server from an address that is not the host's. Needs root and `ip`.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A namespace with an address of its own, and the host's address on the pair (a /30 of
/// 10.231.0.0/16 chosen from the process id and a counter); removed when dropped.
pub struct Peer {
    name: String,
    link: String,
    /// The host's end: a server bound here is reachable from the namespace.
    pub host_ip: String,
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().unwrap();
    assert!(status.success(), "ip {args:?} failed");
}

impl Peer {
    pub fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = (std::process::id() * 8 + NEXT.fetch_add(1, Ordering::Relaxed)) % 16_000;
        let (third, fourth) = (n / 64, (n % 64) * 4);
        let name = format!("srt-{n}");
        let link = format!("srth{n}");
        let inside = format!("srtn{n}");
        let host_ip = format!("10.231.{third}.{}", fourth + 1);
        let peer_ip = format!("10.231.{third}.{}", fourth + 2);
        // Left over from a killed run with the same numbers.
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        let _ = Command::new("ip").args(["link", "del", &link]).status();
        ip(&["netns", "add", &name]);
        ip(&[
            "link", "add", &link, "type", "veth", "peer", "name", &inside,
        ]);
        ip(&["link", "set", &inside, "netns", &name]);
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &link]);
        ip(&["link", "set", &link, "up"]);
        let exec = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &name, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        exec(&["addr", "add", &format!("{peer_ip}/30"), "dev", &inside]);
        exec(&["link", "set", &inside, "up"]);
        exec(&["link", "set", "lo", "up"]);
        Self {
            name,
            link,
            host_ip,
        }
    }

    /// `curl` from the namespace: the status and the body. `args` come before the URL.
    pub fn curl(&self, method: &str, url: &str, args: &[&str]) -> (u16, String) {
        let output = Command::new("ip")
            .args([
                "netns", "exec", &self.name, "curl", "-s", "-m", "20", "-X", method,
            ])
            .args(["-w", "\n%{http_code}"])
            .args(args)
            .arg(url)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
        (status.trim().parse().unwrap_or(0), body.to_owned())
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.link])
            .status();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
