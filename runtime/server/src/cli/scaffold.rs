//! `service-runtime adapters new NAME --lang rust|python|js [--world adapter|proxy]`: a
//! ready-to-build adapter project from the templates in `runtime/server/templates/`, embedded in
//! the binary. Every project gets a grant and a README with its build command; one for the
//! contract's world gets a copy of the contract, and the Python and JavaScript ones the helper
//! module of their language's example. `--world proxy` makes a standard `wasi:http/proxy`
//! component (Rust, with the `wasi` crate).

use std::path::Path;

use crate::app::NATIVE_NAMES;
use crate::wasm::bundled::BUNDLED;
use crate::wasm::check_name;
use anyhow::Context;
use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Lang {
    Rust,
    Python,
    Js,
}

/// The world a project is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum World {
    /// The contract's `agent-adapter` world (`describe`, routes, agent runs).
    Adapter,
    /// A standard `wasi:http/proxy` component, served at every path under its prefix.
    Proxy,
}

/// A file of a project: its path in the project and its template text.
type File = (&'static str, &'static str);

/// What differs between the languages.
struct Template {
    language: &'static str,
    /// The contract's files ([`COMMON`]) or a proxy's.
    common: &'static [File],
    files: &'static [File],
    /// What the README says to install once.
    setup: &'static str,
    /// The command that installs it, printed before the build.
    prepare: &'static str,
    /// The one build command, run in the project folder.
    build: &'static str,
    /// Where the build writes the component, in the project folder.
    component: &'static str,
    /// README rows (`| file | what it is |`) for `files`.
    file_rows: &'static str,
    /// What its grant allows and it serves beyond the common template's, for the README.
    granted: &'static str,
    serves: &'static str,
}

/// Files every project of the contract's world gets.
const COMMON: &[File] = &[
    (
        "wit/adapter.wit",
        include_str!("../../../../wit/adapter.wit"),
    ),
    ("README.md", include_str!("../../templates/README.md")),
];

/// The grant of a project that runs agents and nothing else.
const AGENT_GRANT: File = ("grant.toml", include_str!("../../templates/grant.toml"));

/// Files every `wasi:http/proxy` project gets.
const PROXY_COMMON: &[File] = &[
    (
        "grant.toml",
        include_str!("../../templates/grant-proxy.toml"),
    ),
    ("README.md", include_str!("../../templates/README-proxy.md")),
];

const RUST: Template = Template {
    language: "Rust",
    common: COMMON,
    files: &[
        (
            "Cargo.toml",
            include_str!("../../templates/rust/Cargo.toml"),
        ),
        (
            "src/lib.rs",
            include_str!("../../templates/rust/src/lib.rs"),
        ),
        (".gitignore", include_str!("../../templates/rust/gitignore")),
        (
            "tests/replay.rs",
            include_str!("../../templates/rust/tests/replay.rs"),
        ),
        AGENT_GRANT,
    ],
    setup: "Needs Rust and its `wasm32-wasip2` target (`rustup target add wasm32-wasip2`).",
    prepare: "rustup target add wasm32-wasip2",
    build: "cargo build --release --target wasm32-wasip2",
    component: "target/wasm32-wasip2/release/adapter.wasm",
    file_rows: "| `src/lib.rs` | the adapter: `describe`, its routes |\n\
                | `Cargo.toml` | a project of its own, depending on `wit-bindgen` only |\n\
                | `tests/replay.rs` | `cargo test` replays the recordings saved in `fixtures/` against the build |\n",
    granted: "",
    serves: "",
};

const RUST_PROXY: Template = Template {
    language: "Rust",
    common: PROXY_COMMON,
    files: &[
        (
            "Cargo.toml",
            include_str!("../../templates/rust-proxy/Cargo.toml"),
        ),
        (
            "src/lib.rs",
            include_str!("../../templates/rust-proxy/src/lib.rs"),
        ),
        (
            ".gitignore",
            include_str!("../../templates/rust-proxy/gitignore"),
        ),
    ],
    setup: "Needs Rust and its `wasm32-wasip2` target (`rustup target add wasm32-wasip2`).",
    prepare: "rustup target add wasm32-wasip2",
    build: "cargo build --release --target wasm32-wasip2",
    component: "target/wasm32-wasip2/release/adapter.wasm",
    file_rows: "| `src/lib.rs` | the component: `wasi:http/incoming-handler` |\n\
                | `Cargo.toml` | a project of its own, depending on the `wasi` crate only |\n",
    granted: "",
    serves: "",
};

const PYTHON: Template = Template {
    language: "Python",
    common: COMMON,
    files: &[
        ("app.py", include_str!("../../templates/python/app.py")),
        (
            "guest_util.py",
            include_str!("../../../../adapters-wasm/examples/python-echo/guest_util.py"),
        ),
        (
            ".gitignore",
            include_str!("../../templates/python/gitignore"),
        ),
        AGENT_GRANT,
    ],
    setup: "Needs `pip install componentize-py==0.25.1` (it brings its own CPython). It builds \
            against the `agent-adapter` world, which imports only what its grant allows.",
    prepare: "pip install componentize-py==0.25.1",
    build: "componentize-py -d wit -w service:adapter/agent-adapter@0.2.3 componentize -p . app -o {{name}}.wasm",
    component: "{{name}}.wasm",
    file_rows: "| `app.py` | the adapter: `describe`, its routes |\n\
                | `guest_util.py` | the plumbing: answers, `{\"error\": ...}`, request parts, a route table |\n",
    granted: "",
    serves: "\n\nIt sends no HTTP of its own: componentize-py 0.25 has no standard-library client \
             over `wasi:http` (`urllib` and `http.client` need sockets, which the sandbox does not \
             give). Import `service:adapter/outbound-http@0.2.3` for that (world `adapter`, in \
             `wit/adapter.wit`) and name its origins in the grant (`outbound_hosts`).",
};

const JS: Template = Template {
    language: "JavaScript",
    common: COMMON,
    files: &[
        ("app.js", include_str!("../../templates/js/app.js")),
        (
            "guest-util.js",
            include_str!("../../../../adapters-wasm/examples/js-echo/guest-util.js"),
        ),
        (
            "package.json",
            include_str!("../../templates/js/package.json"),
        ),
        (".gitignore", include_str!("../../templates/js/gitignore")),
        ("grant.toml", include_str!("../../templates/js/grant.toml")),
    ],
    setup: "Needs Node.js 20 or later; `npm install` once installs the build tools \
            (componentize-js and jco, pinned in `package.json`). It builds against the \
            `agent-adapter` world; the standard `fetch` comes with componentize-js (it imports \
            `wasi:http/outgoing-handler`), and the host sends its requests only to the origins \
            the grant names (`outbound_hosts`).",
    prepare: "npm install",
    build: "npm run build",
    component: "{{name}}.wasm",
    file_rows: "| `app.js` | the adapter: `describe`, its routes |\n\
                | `guest-util.js` | the plumbing: answers, `{\"error\": ...}`, request parts, a route table |\n\
                | `package.json` | the pinned build tools and the build command |\n",
    granted: " and requests to `https://example.com` (`fetch`)",
    serves: " `GET /upstream` answers what the standard `fetch` got from `https://example.com/` \
             (`UPSTREAM` in `app.js`): the host sends it only to the origins the grant names.",
};

/// The template of a language and world; a proxy project is offered in Rust.
fn template(lang: Lang, world: World) -> anyhow::Result<&'static Template> {
    Ok(match (lang, world) {
        (Lang::Rust, World::Adapter) => &RUST,
        (Lang::Rust, World::Proxy) => &RUST_PROXY,
        (Lang::Python, World::Adapter) => &PYTHON,
        (Lang::Js, World::Adapter) => &JS,
        (Lang::Python | Lang::Js, World::Proxy) => anyhow::bail!(
            "--world proxy is offered for --lang rust; componentize-js and componentize-py build \
             wasi:http/proxy components from their own templates, and the server serves them too"
        ),
    })
}

/// Refuses the name of a native adapter (no component can take it), and of a bundled one
/// unless `replace` says the author means to replace it.
pub(super) fn check_free(name: &str, replace: bool) -> anyhow::Result<()> {
    if NATIVE_NAMES.contains(&name) {
        anyhow::bail!("{name:?} is the name of a native adapter of this server: choose another");
    }
    if !replace && BUNDLED.iter().any(|b| b.name == name) {
        anyhow::bail!(
            "{name:?} is the name of an adapter bundled with this server: choose another, or \
             pass --replace to write one that replaces it once installed"
        );
    }
    Ok(())
}

/// Writes the project of adapter `name` into `dir`, which must not exist yet. Returns what to
/// tell the author: the build command and where the component lands.
pub(super) fn create(name: &str, lang: Lang, world: World, dir: &Path) -> anyhow::Result<String> {
    check_name(name)?;
    let template = template(lang, world)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    // Creating the folder itself is the check: nothing of an existing one is touched.
    std::fs::create_dir(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
            "{} already exists: choose another folder with --dir",
            dir.display()
        ),
        _ => anyhow::anyhow!("cannot create {}: {e}", dir.display()),
    })?;
    let fill = |text: &str| fill(text, name, template);
    for (path, text) in template.common.iter().chain(template.files) {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, fill(text))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(fill(&format!(
        "created {} ({} adapter {name})\nfirst:     {}\nbuild:     {}\ncomponent: {}\n",
        dir.display(),
        template.language,
        template.prepare,
        template.build,
        template.component,
    )))
}

/// A template's text with its placeholders filled. The npm and cargo package name is the
/// adapter's, lower case and prefixed (neither allows every adapter name: npm no capitals,
/// cargo no leading digit).
fn fill(text: &str, name: &str, template: &Template) -> String {
    text.replace("{{files}}", template.file_rows)
        .replace("{{granted}}", template.granted)
        .replace("{{serves}}", template.serves)
        .replace("{{setup}}", template.setup)
        .replace("{{build}}", template.build)
        .replace("{{component}}", template.component)
        .replace("{{language}}", template.language)
        .replace("{{package}}", &format!("adapter-{}", name.to_lowercase()))
        .replace("{{name}}", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled() {
        for template in [&RUST, &RUST_PROXY, &PYTHON, &JS] {
            let lang = template.language;
            for (path, text) in template.common.iter().chain(template.files) {
                let filled = fill(text, "My_adapter-1", template);
                for placeholder in [
                    "{{name}}",
                    "{{package}}",
                    "{{files}}",
                    "{{setup}}",
                    "{{build}}",
                    "{{component}}",
                    "{{language}}",
                    "{{granted}}",
                    "{{serves}}",
                ] {
                    assert!(
                        !filled.contains(placeholder),
                        "{lang} {path}: {placeholder}"
                    );
                }
            }
        }
    }
}
