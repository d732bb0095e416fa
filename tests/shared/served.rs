//! A server of the binary for benches: started on a fresh data directory, killed when dropped.

use std::process::{Child, Stdio};
use std::time::Duration;

use super::serve::{clean_command, spawn_serving, wait_until_ready};

/// `bin` serving on a fresh data directory with `env` (and no other variables), once ready;
/// killed when dropped. For benches that drive the real binary.
pub struct Served {
    child: Child,
    pub url: String,
    _home: tempfile::TempDir,
}

impl Served {
    pub fn start(bin: &str, env: &[(&str, &str)]) -> Self {
        let home = tempfile::tempdir().unwrap();
        let data_dir = home.path().join("data");
        std::fs::create_dir_all(&data_dir).unwrap();
        let mut command = clean_command(bin, home.path(), "warn");
        command.envs(env.iter().copied()).stderr(Stdio::null());
        let (child, url) = spawn_serving(command, &data_dir);
        let url = url.expect("the server did not start");
        wait_until_ready(&url, &data_dir, Duration::from_secs(120));
        Self {
            child,
            url,
            _home: home,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
