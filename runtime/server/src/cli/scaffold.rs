//! `service-runtime adapters new NAME --lang rust|python|js`: a ready-to-build adapter project
//! from the templates in `runtime/server/templates/`, embedded in the binary. Every project
//! gets a copy of the contract, a grant and a README with its build command; the Python and
//! JavaScript ones get the helper module of their language's example.

use std::path::Path;

use anyhow::Context;
use clap::ValueEnum;
use service_runtime::app::NATIVE_NAMES;
use service_runtime::wasm::bundled::BUNDLED;
use service_runtime::wasm::check_name;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// A file of a project: its path in the project and its template text.
type File = (&'static str, &'static str);

/// What differs between the languages.
struct Template {
    language: &'static str,
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
}

/// Files every project gets.
const COMMON: &[File] = &[
    (
        "wit/adapter.wit",
        include_str!("../../../../wit/adapter.wit"),
    ),
    ("grant.toml", include_str!("../../templates/grant.toml")),
    ("README.md", include_str!("../../templates/README.md")),
];

const RUST: Template = Template {
    language: "Rust",
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
    ],
    setup: "Needs Rust and its `wasm32-wasip2` target (`rustup target add wasm32-wasip2`).",
    prepare: "rustup target add wasm32-wasip2",
    build: "cargo build --release --target wasm32-wasip2",
    component: "target/wasm32-wasip2/release/adapter.wasm",
    file_rows: "| `src/lib.rs` | the adapter: `describe`, its routes |\n\
                | `Cargo.toml` | a project of its own, depending on `wit-bindgen` only |\n",
};

const PYTHON: Template = Template {
    language: "Python",
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
    ],
    setup: "Needs `pip install componentize-py==0.25.1` (it brings its own CPython). It builds \
            against the `agent-adapter` world, which imports only what its grant allows.",
    prepare: "pip install componentize-py==0.25.1",
    build: "componentize-py -d wit -w service:adapter/agent-adapter@0.2.1 componentize -p . app -o {{name}}.wasm",
    component: "{{name}}.wasm",
    file_rows: "| `app.py` | the adapter: `describe`, its routes |\n\
                | `guest_util.py` | the plumbing: answers, `{\"error\": ...}`, request parts, a route table |\n",
};

const JS: Template = Template {
    language: "JavaScript",
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
    ],
    setup: "Needs Node.js 20 or later; `npm install` once installs the build tools \
            (componentize-js and jco, pinned in `package.json`). The build disables \
            componentize-js's `http` and `fetch-event` features: they import `wasi:http`, which \
            the host does not link (outbound HTTP goes through the contract's `outbound-http`). \
            It builds against the `agent-adapter` world, which imports only what its grant allows.",
    prepare: "npm install",
    build: "npm run build",
    component: "{{name}}.wasm",
    file_rows: "| `app.js` | the adapter: `describe`, its routes |\n\
                | `guest-util.js` | the plumbing: answers, `{\"error\": ...}`, request parts, a route table |\n\
                | `package.json` | the pinned build tools and the build command |\n",
};

impl Lang {
    fn template(self) -> &'static Template {
        match self {
            Self::Rust => &RUST,
            Self::Python => &PYTHON,
            Self::Js => &JS,
        }
    }
}

/// Refuses the name of a native adapter (no component can take it), and of a bundled one
/// unless `replace` says the author means to replace it.
pub fn check_free(name: &str, replace: bool) -> anyhow::Result<()> {
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
pub fn create(name: &str, lang: Lang, dir: &Path) -> anyhow::Result<String> {
    check_name(name)?;
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
    let template = lang.template();
    let fill = |text: &str| fill(text, name, template);
    for (path, text) in COMMON.iter().chain(template.files) {
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
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let template = lang.template();
            for (path, text) in COMMON.iter().chain(template.files) {
                let filled = fill(text, "My_adapter-1", template);
                for placeholder in [
                    "{{name}}",
                    "{{package}}",
                    "{{files}}",
                    "{{setup}}",
                    "{{build}}",
                    "{{component}}",
                    "{{language}}",
                ] {
                    assert!(
                        !filled.contains(placeholder),
                        "{lang:?} {path}: {placeholder}"
                    );
                }
            }
        }
    }
}
