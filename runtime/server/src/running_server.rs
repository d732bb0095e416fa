//! The server running for a data directory, as commands find it: `serve` writes its URL to
//! `<data_dir>/server.url` once it listens, and to `server.key` (readable by its owner only)
//! a key that makes whoever sends it this machine's owner, and removes both when it stops; a
//! command uses that URL only when the server there answers as this data directory's replica
//! (a file left by a killed server, or a port taken since by another, is ignored).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::replica;
use crate::settings_store::SettingsStore;

const FILE: &str = "server.url";
const KEY_FILE: &str = "server.key";

/// How long a command waits for the server's health answer before it runs in-process.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The files written while the server runs; removed when dropped.
pub struct Announced(Vec<PathBuf>);

impl Drop for Announced {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The server a command found, and the key it sends.
pub struct Running {
    pub url: String,
    key: String,
}

impl Running {
    /// A client whose requests carry the owner's key.
    pub fn client(&self) -> reqwest::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Ok(mut value) =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {}", self.key))
        {
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap_or_default()
    }
}

/// Writes the URL a command on this machine reaches the server at (loopback when it listens
/// on every address).
pub fn announce(data_dir: &Path, addr: SocketAddr, key: &str) -> std::io::Result<Announced> {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let key_path = data_dir.join(KEY_FILE);
    write_private(&key_path, key)?;
    let path = data_dir.join(FILE);
    let announced = Announced(vec![key_path, path.clone()]);
    std::fs::write(
        &path,
        format!("http://{}\n", SocketAddr::new(ip, addr.port())),
    )?;
    Ok(announced)
}

/// Writes `text` to a new file only its owner may read.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?
        .write_all(text.as_bytes())
}

/// The server running for `data_dir`, if one answers there.
pub async fn find(data_dir: &Path, env: &SettingsStore) -> Option<Running> {
    let url = std::fs::read_to_string(data_dir.join(FILE)).ok()?;
    let key = std::fs::read_to_string(data_dir.join(KEY_FILE)).ok()?;
    let running = Running {
        url: url.trim().to_owned(),
        key: key.trim().to_owned(),
    };
    let replica = replica::server_id(data_dir, env).ok()?;
    let health: serde_json::Value = running
        .client()
        .get(format!("{}/api/health", running.url))
        .timeout(PROBE_TIMEOUT)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    (health["replica"] == replica.as_str()).then_some(running)
}
