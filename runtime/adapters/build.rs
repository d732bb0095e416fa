//! Builds the bundled guest components (`adapters-wasm/calendar`, `teamchat`, `voice`,
//! `webhook`) for wasm32-wasip2 and embeds them, so `cargo run -p service-runtime -- serve` alone serves them.
//! Without the target the server still builds; those adapters then report that they are not
//! installed and how to fix it.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Bundled components: crate (and adapter) name.
const BUNDLED: &[&str] = &["calendar", "teamchat", "voice", "webhook"];
const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let guests = manifest_dir.join("../../adapters-wasm");
    for watched in ["Cargo.toml", "Cargo.lock", "guest-util"]
        .iter()
        .chain(BUNDLED)
    {
        println!("cargo:rerun-if-changed={}", guests.join(watched).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("../../wit").display()
    );

    // Missing, the target's folder makes Cargo run this script at every build, so the bundled
    // adapters appear at the first build after `rustup target add` (nothing else changed).
    let target_lib = target_lib();
    if let Some(lib) = &target_lib {
        println!("cargo:rerun-if-changed={}", lib.display());
    }

    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let built = if target_lib.as_ref().is_some_and(|lib| lib.is_dir()) {
        Some(build(&guests, &guest_target_dir(&out_dir)))
    } else {
        println!(
            "cargo:warning=the {TARGET} target is missing, so the calendar, teamchat, voice and webhook adapters are not bundled: run `rustup target add {TARGET}` and build again"
        );
        None
    };

    let mut code = String::new();
    for name in BUNDLED {
        let wasm = match &built {
            Some(dir) => format!(
                "Some(include_bytes!({:?}))",
                dir.join(format!("{name}.wasm"))
            ),
            None => "None".to_owned(),
        };
        let grant = guests.join(name).join("grant.toml");
        writeln!(
            code,
            "Bundled {{ name: {name:?}, wasm: {wasm}, grant: include_str!({grant:?}) }},"
        )
        .unwrap();
    }
    std::fs::write(out_dir.join("bundled.rs"), format!("&[\n{code}]\n")).unwrap();
}

/// Where the compiler's sysroot keeps the guest target's standard library (a folder that
/// exists once the target is installed).
fn target_lib() -> Option<PathBuf> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())?;
    Some(Path::new(&sysroot).join("lib/rustlib").join(TARGET))
}

/// `<target>/wasm-guests`, beside this build's profile directory (`OUT_DIR` is
/// `<target>[/<triple>]/<profile>/build/<pkg>-<hash>/out`), shared with the tests' guest builds.
/// A directory of its own: the outer build holds the lock on the profile directory.
fn guest_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(4)
        .unwrap_or(out_dir)
        .join("wasm-guests")
}

/// Runs cargo for the guests; returns the directory holding the `.wasm` files.
fn build(guests: &Path, target_dir: &Path) -> PathBuf {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--release", "--locked", "--target", TARGET])
        .arg("--manifest-path")
        .arg(guests.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    for name in BUNDLED {
        command.args(["-p", name]);
    }
    // The outer build's flags and wrappers (clippy-driver, host RUSTFLAGS) are not the guests'.
    for variable in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_MAKEFLAGS",
        "MAKEFLAGS",
        "MFLAGS",
    ] {
        command.env_remove(variable);
    }
    let status = command
        .status()
        .expect("cannot run cargo to build the guest components");
    assert!(
        status.success(),
        "building the bundled guest components in adapters-wasm/ failed (see above)"
    );
    target_dir.join(TARGET).join("release")
}
