//! Replays every recording saved in `fixtures/` against this build: the same call, each import
//! the component makes answered from the recording, nothing sent anywhere. A fixture comes from
//! a running server: `service-runtime adapters replay <recording id> --save fixtures`.
//!
//! Build the component first (`cargo build --release --target wasm32-wasip2`). The server's
//! binary is `$SERVICE_RUNTIME`, else `service-runtime` on the PATH; the component is
//! `$ADAPTER_WASM`, else this project's build.

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn saved_recordings_replay_the_same() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(fixtures) = std::fs::read_dir(root.join("fixtures")) else {
        return;
    };
    let component = std::env::var_os("ADAPTER_WASM").map_or_else(
        || {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| root.join("target"), PathBuf::from);
            target.join("wasm32-wasip2/release/adapter.wasm")
        },
        PathBuf::from,
    );
    let binary = std::env::var_os("SERVICE_RUNTIME").unwrap_or_else(|| "service-runtime".into());
    // A data directory of its own: the replay reads no server's.
    let data_dir = std::env::temp_dir().join(format!("replay-{}", std::process::id()));
    for fixture in fixtures {
        let fixture = fixture.unwrap().path();
        let replayed = Command::new(&binary)
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["adapters", "replay"])
            .arg(&fixture)
            .arg("--wasm")
            .arg(&component)
            .output()
            .expect("service-runtime runs (set SERVICE_RUNTIME to its path)");
        assert!(
            replayed.status.success(),
            "{} does not replay the same:\n{}{}",
            fixture.display(),
            String::from_utf8_lossy(&replayed.stdout),
            String::from_utf8_lossy(&replayed.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&data_dir);
}
