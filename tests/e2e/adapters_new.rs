//! `service-runtime adapters new NAME --lang rust|python|js` through the binary: each template
//! builds with the command it prints, and the component hot-loads into a running server, answers
//! its route and runs an agent; `--world proxy` makes a plain wasi:http component that answers
//! too. Bad names and existing folders are refused.
//!
//! The Python and JavaScript templates need their tools (componentize-py; the JavaScript
//! example's npm tools); without them that part says so loudly and is skipped, and with
//! `CI=true` that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use reqwest::StatusCode;
use serde_json::Value;

use crate::fakes::llm::{self, Reply};
use crate::guests::js_example;
use crate::javascript::npm_tools_available;
use crate::python::componentize_py_available;
use crate::support::{Server, cli, eventually, openai_env};
use crate::wasm::drop_in;

/// `adapters new`, run outside any data directory (it needs none).
fn new(args: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    cli(
        &home.path().join("unused"),
        &[&["adapters", "new"], args].concat(),
    )
}

/// What `adapters new` printed after `label:`.
fn printed<'a>(stdout: &'a str, label: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label} in {stdout}"))
        .trim()
}

/// Creates the project, runs the build command it printed in its folder, and returns the
/// component. Rust builds into a target folder shared across test runs (only the project
/// itself compiles again); JavaScript uses the example's npm tools.
fn create_and_build(name: &str, lang: &str, world: &str, projects: &Path) -> PathBuf {
    let dir = projects.join(name);
    let created = new(&[
        name,
        "--lang",
        lang,
        "--world",
        world,
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let stdout = String::from_utf8(created.stdout).unwrap();
    let first = printed(&stdout, "first:");
    assert!(
        ["rustup target add", "pip install", "npm install"]
            .iter()
            .any(|step| first.starts_with(step)),
        "{stdout}"
    );
    for file in ["grant.toml", "README.md", ".gitignore"] {
        assert!(dir.join(file).is_file(), "{lang}: no {file}");
    }
    assert_eq!(
        dir.join("wit/adapter.wit").is_file(),
        world == "adapter",
        "the contract comes with a project of its world only"
    );
    let build = printed(&stdout, "build:");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains(&format!("```sh\n{build}\n```")), "{readme}");
    assert!(!readme.contains("{{"), "{readme}");

    let rust_target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("template-guests");
    if lang == "js" {
        std::os::unix::fs::symlink(js_example().join("node_modules"), dir.join("node_modules"))
            .unwrap();
    }
    let started = Instant::now();
    let built = Command::new("sh")
        .args(["-c", build])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &rust_target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{lang}: `{build}` failed:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    let component = printed(&stdout, "component:");
    let wasm = match component.strip_prefix("target/") {
        // Out of the shared target folder, which the next Rust project builds into.
        Some(inside) => {
            let kept = dir.join(format!("{name}.wasm"));
            std::fs::copy(rust_target.join(inside), &kept).unwrap();
            kept
        }
        None => dir.join(component),
    };
    eprintln!(
        "{lang}: built {} ({} bytes) in {:.1?}",
        wasm.display(),
        std::fs::metadata(&wasm).unwrap().len(),
        started.elapsed()
    );
    wasm
}

#[tokio::test]
async fn adapters_new_templates_build_hot_load_and_answer() {
    let mut langs = vec!["rust"];
    if componentize_py_available() {
        langs.push("python");
    }
    if npm_tools_available() {
        langs.push("js");
    }
    let projects = tempfile::tempdir().unwrap();
    let built: Vec<(String, PathBuf)> = langs
        .iter()
        .map(|lang| {
            let name = format!("{lang}-hello");
            let wasm = create_and_build(&name, lang, "adapter", projects.path());
            (name, wasm)
        })
        .collect();
    let proxy = create_and_build("rust-proxy", "rust", "proxy", projects.path());

    let fake = llm::openai(vec![Reply::Text("Hi there."); built.len()]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    for (name, wasm) in built.iter().chain([&("rust-proxy".to_owned(), proxy)]) {
        let mut grant =
            std::fs::read_to_string(projects.path().join(name).join("grant.toml")).unwrap();
        if name == "rust-hello" {
            // Its calls are kept, for its own tests to replay below.
            grant.insert_str(0, "record = \"all\"\n");
        }
        drop_in(&server, name, wasm, &grant);
    }
    for (name, _) in &built {
        // The interpreters make large components; a debug build compiles them in tens of seconds.
        let entry = eventually(240, async || {
            let entry = server.adapter(name).await?;
            assert_ne!(entry["status"], "error", "{name} refused: {entry}");
            (entry["status"] == "running").then_some(entry)
        })
        .await;
        let (fetches, recorded) = match name.as_str() {
            "js-hello" => (vec!["origin:https://example.com:443"], vec![]),
            "rust-hello" => (vec![], vec!["record: all"]),
            _ => (vec![], vec![]),
        };
        assert_eq!(
            entry["capabilities"],
            serde_json::json!([fetches, vec!["agent"], recorded].concat()),
            "{entry}"
        );
        assert_eq!(
            entry["metadata"]["ungranted_imports"],
            Value::Null,
            "the template imports only what its grant allows: {entry}"
        );

        let hello = reqwest::get(server.url(&format!("/api/adapters/{name}/hello")))
            .await
            .unwrap();
        let status = hello.status();
        assert_eq!(
            (status, hello.text().await.unwrap()),
            (StatusCode::OK, format!("hello from {name} 0.1.0"))
        );

        let ask = |body: &'static str| {
            reqwest::Client::new()
                .post(server.url(&format!("/api/adapters/{name}/ask")))
                .body(body)
                .send()
        };
        // A route it serves for POST only, asked with GET: 405 naming the method it takes.
        let wrong = reqwest::get(server.url(&format!("/api/adapters/{name}/ask")))
            .await
            .unwrap();
        assert_eq!(
            (
                wrong.status(),
                wrong.headers().get("allow").map(|v| v.to_str().unwrap())
            ),
            (StatusCode::METHOD_NOT_ALLOWED, Some("POST")),
            "{name}"
        );
        let answer = ask("Say hi").await.unwrap();
        assert_eq!(answer.status(), StatusCode::OK, "{name}");
        assert_eq!(answer.text().await.unwrap(), "Hi there.", "{name}");
        let empty = ask("  ").await.unwrap();
        assert_eq!(empty.status(), StatusCode::BAD_REQUEST, "{name}");
        let empty: Value = empty.json().await.unwrap();
        assert_eq!(
            empty["error"], "the body is the prompt, and it is empty",
            "{name}"
        );
    }
    replays_in_its_own_tests(&server, &projects.path().join("rust-hello"), &built[0].1).await;
    let prompts: Vec<Value> = fake
        .requests()
        .iter()
        .map(|r| r.body["messages"].as_array().unwrap().last().unwrap()["content"].clone())
        .collect();
    assert_eq!(prompts, vec![Value::from("Say hi"); built.len()]);

    // The wasi:http component: every path under its prefix reaches it.
    let entry = eventually(60, async || {
        let entry = server.adapter("rust-proxy").await?;
        assert_ne!(entry["status"], "error", "refused: {entry}");
        (entry["status"] == "running").then_some(entry)
    })
    .await;
    assert_eq!(entry["metadata"]["world"], "wasi:http/proxy", "{entry}");
    for (path, status, said) in [
        ("hello", StatusCode::OK, "hello from rust-proxy 0.1.0"),
        (
            "any/where",
            StatusCode::NOT_FOUND,
            "rust-proxy has no route /any/where",
        ),
    ] {
        let answer = reqwest::get(server.url(&format!("/api/adapters/rust-proxy/{path}")))
            .await
            .unwrap();
        assert_eq!(answer.status(), status);
        assert_eq!(answer.text().await.unwrap(), said);
    }
}

/// The Rust template's `tests/replay.rs`: the recorded `POST /ask` saved into the project's
/// `fixtures/` replays under `cargo test` (its agent run answered from the recording).
async fn replays_in_its_own_tests(server: &Server, project: &Path, wasm: &Path) {
    let (_, body) = server.get("/api/adapters/rust-hello/recordings").await;
    let asked = body["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["export"] == "handle-http" && r["outcome"] == "ok")
        .unwrap_or_else(|| panic!("no recorded request: {body}"))["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let fixtures = project.join("fixtures");
    let saved = cli(
        &server.data_dir,
        &[
            "adapters",
            "replay",
            &asked,
            "--save",
            fixtures.to_str().unwrap(),
        ],
    );
    assert!(
        saved.status.success(),
        "{}",
        String::from_utf8_lossy(&saved.stderr)
    );
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("template-guests");
    let tested = Command::new("cargo")
        .args(["test", "--test", "replay"])
        .current_dir(project)
        .env("CARGO_TARGET_DIR", target)
        .env("ADAPTER_WASM", wasm)
        .env("SERVICE_RUNTIME", crate::support::BIN)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&tested.stdout),
        String::from_utf8_lossy(&tested.stderr)
    );
    assert!(
        tested.status.success() && printed.contains("saved_recordings_replay_the_same ... ok"),
        "{printed}"
    );
}

#[test]
fn adapters_new_refuses_bad_names_and_existing_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let taken = tmp.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("keep.txt"), "mine").unwrap();
    let long = "a".repeat(65);
    for (args, needle) in [
        (
            vec!["no/good", "--lang", "rust"],
            "adapter name \"no/good\" is not valid",
        ),
        (vec![long.as_str(), "--lang", "js"], "up to 64 letters"),
        (
            vec!["fine", "--lang", "python", "--dir", taken.to_str().unwrap()],
            "already exists",
        ),
        (vec!["fine", "--lang", "cobol"], "invalid value 'cobol'"),
        (
            vec!["email", "--lang", "rust", "--replace"],
            "the name of a native adapter",
        ),
        (
            vec!["teamchat", "--lang", "rust"],
            "pass --replace to write one that replaces it",
        ),
        (
            vec!["fine", "--lang", "js", "--world", "proxy"],
            "--world proxy is offered for --lang rust",
        ),
    ] {
        let out = new(&args);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains(needle),
            "{args:?}: {said}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&taken).unwrap().count(),
        1,
        "the existing folder is untouched"
    );
    assert!(!Path::new("teamchat").exists() && !Path::new("email").exists());
    let replacing = tmp.path().join("my-teamchat");
    let out = new(&[
        "teamchat",
        "--lang",
        "rust",
        "--replace",
        "--dir",
        replacing.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The default folder is ./NAME.
    let made = Command::new(crate::support::BIN)
        .args(["adapters", "new", "here", "--lang", "rust"])
        .current_dir(tmp.path())
        .env("SERVICE_DATA_DIR", tmp.path().join("data"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let lib = std::fs::read_to_string(tmp.path().join("here/src/lib.rs")).unwrap();
    assert!(lib.contains("const NAME: &str = \"here\";"), "{lib}");
    let manifest = std::fs::read_to_string(tmp.path().join("here/Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"adapter-here\""), "{manifest}");
}
