//! A real PostgreSQL server for tests and benches: Debian's `postgresql` binaries, a cluster
//! made by `initdb` in a temporary folder, started once per test process and listening on a
//! free loopback port. Each caller takes a fresh database of its own. PostgreSQL refuses to run
//! as root, so under root the cluster belongs to the package's `postgres` user. The server dies
//! with the process that started it (a parent-death signal), even after kill -9.

use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

// The one way tests and benches wait: every includer has it beside this module.
use super::wait;

/// A running test server.
pub struct PostgresServer {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    user: Option<(u32, u32)>,
    durability: Durability,
    host: Host,
    databases: AtomicU32,
}

/// Where the server runs: on loopback in this process's network (tests), or on a machine a
/// bench simulates, whose address it listens on and whose network namespace and cores the
/// thread that starts it enters first (`enter`; the server inherits them).
#[derive(Clone)]
pub struct Host {
    pub address: IpAddr,
    pub enter: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl Host {
    fn loopback() -> Self {
        Self {
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            enter: None,
        }
    }
}

/// What a commit waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Nothing reaches the disk on purpose (`fsync=off`): tests, which never crash the server.
    None,
    /// As the SQLite backend's WAL with `synchronous=NORMAL`: a commit does not wait for its
    /// log to be flushed (`synchronous_commit=off`), but the server writes and syncs it as
    /// usual, so a crash loses at most the last moments and never the database. For benches.
    LikeSqlite,
}

/// The server of this process, started on first use; `None` (said loudly) when the PostgreSQL
/// binaries are missing, and then a failure under CI (`CI=true`).
pub fn postgres_server() -> Option<&'static PostgresServer> {
    static SERVER: OnceLock<Option<PostgresServer>> = OnceLock::new();
    SERVER
        .get_or_init(|| start("shared", Durability::None, Host::loopback()))
        .as_ref()
}

/// A server of its own, for a test that stops and starts it (others keep theirs), or a bench
/// that wants its commits written as in production.
pub fn private_postgres_server(name: &str, durability: Durability) -> Option<PostgresServer> {
    start(name, durability, Host::loopback())
}

/// A server of its own on `host`.
pub fn private_postgres_server_on(
    name: &str,
    durability: Durability,
    host: Host,
) -> Option<PostgresServer> {
    start(name, durability, host)
}

impl PostgresServer {
    /// `postgres://` URL of a new, empty database.
    pub fn fresh_database(&self) -> String {
        let name = format!(
            "t{}_{}",
            std::process::id(),
            self.databases.fetch_add(1, Ordering::Relaxed)
        );
        self.psql(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("cannot create database {name}: {e}"));
        self.url(&name)
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@{}/{database}", self.address())
    }

    /// Where the server listens.
    pub fn address(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::new(self.host.address, self.port)
    }

    /// Runs one SQL command as the superuser; `Err` holds what psql printed.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        self.sql(&self.url("postgres"), sql)
    }

    /// Runs one SQL command in the database at `url` (one of [`Self::fresh_database`]).
    pub fn sql(&self, url: &str, sql: &str) -> Result<String, String> {
        let mut command = Command::new(self.bin.join("psql"));
        command
            .args(["-XAtq", "-d", url])
            .arg("-c")
            .arg(sql)
            .env_remove("PGPASSWORD");
        let out = command.output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Stops accepting connections and ends the ones open (`pg_ctl stop -m fast`), then
    /// starts again on the same port after `down`: what a replica sees when the database
    /// goes away for a while.
    pub fn restart_after(&self, down: Duration) {
        let data = self.data.clone();
        let status = self
            .as_owner(Command::new(self.bin.join("pg_ctl")))
            .args(["stop", "-m", "fast", "-w", "-D"])
            .arg(&data)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "pg_ctl stop failed");
        std::thread::sleep(down);
        launch(
            &self.bin,
            &data,
            self.port,
            self.user,
            self.durability,
            &self.host,
        );
        self.wait_ready();
    }

    fn as_owner(&self, mut command: Command) -> Command {
        if let Some((uid, gid)) = self.user {
            command.uid(uid).gid(gid);
        }
        command
    }

    fn wait_ready(&self) {
        let mut last = String::new();
        let ready = wait::until_blocking(Duration::from_secs(30), wait::EVERY, || {
            self.psql("SELECT 1").map_err(|e| last = e).ok()
        });
        assert!(ready.is_some(), "PostgreSQL did not start: {last}");
    }
}

impl Drop for PostgresServer {
    /// A private server stops with its owner (the shared one lives as long as the process).
    fn drop(&mut self) {
        let _ = self
            .as_owner(Command::new(self.bin.join("pg_ctl")))
            .args(["stop", "-m", "immediate", "-D"])
            .arg(&self.data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(root) = self.data.parent() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("postgres").is_file())
        .collect();
    versions.sort();
    versions.pop()
}

/// A cluster folder of this process; folders of processes that are gone are removed first.
fn cluster_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("service-runtime-pg-{}-{name}", std::process::id()))
}

fn remove_stale_clusters() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("service-runtime-pg-")
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The `postgres` system user's (uid, gid), when running as root.
fn postgres_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let line = passwd.lines().find(|l| l.starts_with("postgres:"))?;
    let fields: Vec<&str> = line.split(':').collect();
    Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(name: &str, durability: Durability, host: Host) -> Option<PostgresServer> {
    let present = bin_dir();
    let message = "PostgreSQL is not installed (Debian's postgresql package): \
                   the tests of the PostgreSQL backend cannot run";
    if present.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{message}; CI=true requires it"
        );
        eprintln!("\n{}\n!!! {message}\n{}\n", "!".repeat(78), "!".repeat(78));
        return None;
    }
    let bin = present?;
    remove_stale_clusters();
    let root = cluster_dir(name);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let user = postgres_user();
    if let Some((uid, gid)) = user {
        chown(&root, Some(uid), Some(gid)).unwrap();
    }
    let data = root.join("data");
    let mut initdb = Command::new(bin.join("initdb"));
    if let Some((uid, gid)) = user {
        initdb.uid(uid).gid(gid);
    }
    let out = initdb
        .args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
            "-D",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if !host.address.is_loopback() {
        // initdb trusts loopback only; a simulated machine's peers are on its network.
        let mut hba = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("pg_hba.conf"))
            .unwrap();
        std::io::Write::write_all(&mut hba, b"host all all samenet trust\n").unwrap();
    }
    let port = free_port();
    launch(&bin, &data, port, user, durability, &host);
    let server = PostgresServer {
        bin,
        data,
        port,
        user,
        durability,
        host,
        databases: AtomicU32::new(0),
    };
    server.wait_ready();
    Some(server)
}

/// Starts `postgres` from a thread that lives as long as the process, so the parent-death
/// signal (which follows the thread that forked) comes only when the process ends.
fn launch(
    bin: &Path,
    data: &Path,
    port: u16,
    user: Option<(u32, u32)>,
    durability: Durability,
    host: &Host,
) {
    let (bin, data, host) = (bin.to_owned(), data.to_owned(), host.clone());
    let (started, wait) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("postgres-server".into())
        .spawn(move || {
            if let Some(enter) = &host.enter {
                enter();
            }
            let listen = format!("listen_addresses={}", host.address);
            let mut command = Command::new(bin.join("postgres"));
            if let Some((uid, gid)) = user {
                command.uid(uid).gid(gid);
            }
            let socket_dir = data.parent().unwrap().to_owned();
            command
                .arg("-D")
                .arg(&data)
                .args(["-p", &port.to_string(), "-k"])
                .arg(&socket_dir)
                .args([
                    "-c",
                    &listen,
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "max_connections=400",
                ]);
            // Every statement logged with its duration to files in this folder (writable by
            // the server's user): how the statements a reply costs are counted and timed.
            if let Ok(dir) = std::env::var("TEST_POSTGRES_STATEMENT_LOG") {
                let folder = format!("log_directory={dir}");
                command.args(["-c", "logging_collector=on", "-c", &folder]);
                command.args(["-c", "log_min_duration_statement=0"]);
            }
            if durability == Durability::None {
                command.args(["-c", "fsync=off", "-c", "full_page_writes=off"]);
            }
            command.stdout(Stdio::null()).stderr(Stdio::null());
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let mut child = command.spawn().expect("cannot start postgres");
            started.send(()).unwrap();
            let _ = child.wait();
            // Parked, not returned: the thread's end would signal a restarted server.
            loop {
                std::thread::park();
            }
        })
        .unwrap();
    wait.recv().unwrap();
}
