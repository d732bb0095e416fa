//! The server running for a data directory, as commands find it: `serve` writes its URL to
//! `<data_dir>/server.url` once it listens and removes it when it stops; a command uses that
//! URL only when the server there answers as this data directory's replica (a file left by a
//! killed server, or a port taken since by another, is ignored).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::replica;
use crate::settings_store::SettingsStore;

const FILE: &str = "server.url";

/// How long a command waits for the server's health answer before it runs in-process.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The URL written while the server runs; removed when dropped.
pub struct Announced(PathBuf);

impl Drop for Announced {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes the URL a command on this machine reaches the server at (loopback when it listens
/// on every address).
pub fn announce(data_dir: &Path, addr: SocketAddr) -> std::io::Result<Announced> {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let path = data_dir.join(FILE);
    std::fs::write(
        &path,
        format!("http://{}\n", SocketAddr::new(ip, addr.port())),
    )?;
    Ok(Announced(path))
}

/// The URL of the server running for `data_dir`, if one answers there.
pub async fn find(data_dir: &Path, env: &SettingsStore) -> Option<String> {
    let url = std::fs::read_to_string(data_dir.join(FILE)).ok()?;
    let url = url.trim().to_owned();
    let replica = replica::server_id(data_dir, env).ok()?;
    let health: serde_json::Value = reqwest::Client::new()
        .get(format!("{url}/api/health"))
        .timeout(PROBE_TIMEOUT)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    (health["replica"] == replica.as_str()).then_some(url)
}
