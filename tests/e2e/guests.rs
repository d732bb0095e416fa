//! Guest components for the tests, built from `adapters-wasm/` once per test run (cargo makes
//! repeat builds no-ops).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

fn target_root() -> PathBuf {
    // `<target>/tmp` for integration tests; the guests build beside it.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn build(target: &Path, variant: Option<(&str, &[(&str, &str)])>) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../adapters-wasm/Cargo.toml");
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    if let Some((package, env)) = variant {
        cargo.args(["-p", package]).envs(env.iter().copied());
    }
    let status = cargo.status().unwrap();
    assert!(
        status.success(),
        "building the guest components failed (is `rustup target add wasm32-wasip2` done?)"
    );
}

/// The `.wasm` of a fixture crate (`echo`, `hostile`, `unknown_import`, `future_version`).
pub fn guest(crate_name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let target = target_root().join("wasm-guests");
        build(&target, None);
        target.join("wasm32-wasip2/release")
    });
    dir.join(format!("{crate_name}.wasm"))
}

/// `echo` built to answer as version 2.
pub fn echo_v2() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let target = target_root().join("wasm-guests-v2");
            build(&target, Some(("echo", &[("ECHO_VERSION", "2")])));
            target.join("wasm32-wasip2/release")
        })
        .join("echo.wasm")
}

/// `echo` as built for `service:adapter@0.1.0`, checked in (see adapters-wasm/v0.1/README.md).
pub fn echo_v0_1() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/echo-0.1.0.wasm")
}

/// A build of a fixture crate with build-time variables (e.g. `hostile` with `HOSTILE_NAME`),
/// copied to `<variant>.wasm`. Variants share one target folder (only the fixture rebuilds),
/// one build at a time.
pub fn variant(crate_name: &str, variant: &str, env: &[(&str, &str)]) -> PathBuf {
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = BUILDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let target = target_root().join("wasm-guests-variants");
    build(&target, Some((&crate_name.replace('_', "-"), env)));
    let copy = target.join(format!("{variant}.wasm"));
    std::fs::copy(
        target
            .join("wasm32-wasip2/release")
            .join(format!("{crate_name}.wasm")),
        &copy,
    )
    .unwrap();
    copy
}

pub const COMPONENTIZE_PY: &str = "componentize-py";

/// Builds the component once per test run into `<target>/python-guests/` with the example's
/// own `build.sh` (the command its README gives), so a script that drifts from the contract
/// fails here. Python writes no `__pycache__` into the source tree meanwhile.
pub fn python_echo() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let example = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../adapters-wasm/examples/python-echo");
            let out = target_root().join("python-guests");
            std::fs::create_dir_all(&out).unwrap();
            let wasm = out.join("python-echo.wasm");
            let started = Instant::now();
            let built = Command::new("sh")
                .arg(example.join("build.sh"))
                .arg(&wasm)
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .output()
                .unwrap();
            assert!(
                built.status.success(),
                "build.sh failed:\n{}{}",
                String::from_utf8_lossy(&built.stdout),
                String::from_utf8_lossy(&built.stderr)
            );
            eprintln!(
                "built {} ({} bytes) in {:.1?}",
                wasm.display(),
                std::fs::metadata(&wasm).unwrap().len(),
                started.elapsed()
            );
            wasm
        })
        .clone()
}

/// The JavaScript example, whose `node_modules/` (after `npm ci`) holds the npm build tools.
pub fn js_example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../adapters-wasm/examples/js-echo")
}

/// Runs a project's `npm run build`, its output going to `out` instead of beside the source.
pub fn npm_build(project: &Path, out: &Path) {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let started = Instant::now();
    let built = Command::new("npm")
        .args(["run", "--silent", "build", "--", "--out"])
        .arg(out)
        .current_dir(project)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "npm run build failed in {}:\n{}{}",
        project.display(),
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    eprintln!(
        "built {} ({} bytes) in {:.1?}",
        out.display(),
        std::fs::metadata(out).unwrap().len(),
        started.elapsed()
    );
}

/// The JavaScript example built once per test run into `<target>/js-guests/` with its
/// `npm run build` (componentize-js; `npm install` in its folder first).
pub fn js_echo() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let wasm = target_root().join("js-guests/js-echo.wasm");
            npm_build(&js_example(), &wasm);
            wasm
        })
        .clone()
}
