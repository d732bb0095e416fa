//! Starting `service-runtime serve` as a child process, shared by the end-to-end tests and the
//! benches that drive the real binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

// The one way tests and benches wait: every includer has it beside this module.
use super::wait;

/// A command for `bin` with a clean environment: nothing leaks in from the developer's shell
/// (real keys, a real data directory).
pub fn clean_command(bin: &str, home: &Path, rust_log: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("RUST_LOG", rust_log);
    cmd
}

/// Spawns `serve --port 0` (stdout piped) and reads the address it prints first; `Err` holds
/// what it printed instead. What it prints later (a first-admin link) goes to
/// `<data_dir>/server.stdout`.
pub fn spawn_serving(mut serve: Command, data_dir: &Path) -> (Child, Result<String, String>) {
    let mut child = serve
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(data_dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut line).unwrap();
    let rest = data_dir.join("server.stdout");
    std::thread::spawn(move || {
        if let Ok(mut file) = std::fs::File::create(rest) {
            let _ = std::io::copy(&mut stdout, &mut file);
        }
    });
    let url = line
        .trim()
        .strip_prefix("service-runtime listening on ")
        .map(str::to_owned)
        .ok_or(line);
    (child, url)
}

/// The body of `GET <path>` from the server at `url` (HTTP/1.0, blocking), if it answered. It
/// asks as the owner (the key the server writes to `data_dir`), as commands on its machine do:
/// a server that asks callers to sign in tells strangers little.
fn get(url: &str, data_dir: &Path, path: &str) -> Option<String> {
    let key = std::fs::read_to_string(data_dir.join("server.key")).ok()?;
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\r\n",
        key.trim()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}

/// Waits until every component of the server at `url` runs its optimized code (benches time
/// that code, and its compiles would compete with what they time).
pub fn wait_until_optimized(url: &str, data_dir: &Path, within: Duration) {
    let optimized = wait::until_blocking(within, Duration::from_millis(50), || {
        let listed: serde_json::Value =
            serde_json::from_str(&get(url, data_dir, "/api/adapters")?).ok()?;
        listed["adapters"]
            .as_array()?
            .iter()
            .filter(|a| a["kind"] == "wasm")
            .all(|a| a["metadata"]["code"] == "optimized (Cranelift)")
            .then_some(())
    });
    assert!(
        optimized.is_some(),
        "the components were not optimized within {within:?}"
    );
}

/// Waits (blocking: servers start outside async code too) until the server at `url` says on
/// `/api/health` that its adapters have started and its components are loaded.
pub fn wait_until_ready(url: &str, data_dir: &Path, within: Duration) {
    let mut answer = String::new();
    let ready = wait::until_blocking(within, Duration::from_millis(20), || {
        answer = get(url, data_dir, "/api/health").unwrap_or_default();
        answer.contains(r#""adapters":"ready""#).then_some(())
    });
    assert!(
        ready.is_some(),
        "the adapters did not finish starting within {within:?}: {answer}"
    );
}
