//! Every adapter the server would load, read from the binary and the adapters folder without
//! loading anything (`adapters list`): native adapters, bundled components (and the files that
//! override them), and component files.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::folder;
use super::loader::{GrantSource, Loader, check_name};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A component compiled into the binary.
    Bundled,
    /// A component file in the adapters folder.
    Component,
    /// Built into the server (not a component).
    Native,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bundled => "bundled",
            Self::Component => "component",
            Self::Native => "native",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: String,
    pub kind: Kind,
    /// Its `.wasm` in the adapters folder and its size; for a bundled component, the file that
    /// overrides it.
    pub file: Option<(PathBuf, u64)>,
    /// `None` for a native adapter, which has no grant.
    pub grant: Option<GrantSource>,
    /// Why the server would not serve it as it is, when it can tell without loading it.
    pub problem: Option<String>,
}

/// Components (bundled or files) by name, then native adapters, in the order of their names.
pub fn inventory(loader: &Loader) -> Vec<Listed> {
    let files = folder::scan(loader.adapters_dir());
    let mut components: BTreeMap<String, Listed> = BTreeMap::new();
    for bundled in loader.bundled_names() {
        let problem = loader.bundled_bytes(bundled).err().map(|e| e.to_string());
        components.insert(
            bundled.to_owned(),
            listed(loader, bundled, Kind::Bundled, problem),
        );
    }
    for (name, found) in files {
        let Some((path, (size, _))) = found.wasm else {
            continue;
        };
        let problem = if loader.native_names().contains(&name) {
            Some(format!(
                "{name:?} is the name of a native adapter: the file is refused"
            ))
        } else {
            check_name(&name).err().map(|e| e.to_string())
        };
        let entry = components
            .entry(name.clone())
            .or_insert_with(|| listed(loader, &name, Kind::Component, None));
        // A file overrides the bundled component of its name, whatever was wrong with that,
        // and gets its grant only if it is that very component.
        if entry.kind == Kind::Bundled {
            let bytes = std::fs::read(&path).unwrap_or_default();
            entry.grant = Some(loader.grant_source(&name, Some(&bytes)));
        }
        entry.problem = problem;
        entry.file = Some((path, size));
    }
    let mut natives: Vec<Listed> = loader
        .native_names()
        .iter()
        .map(|name| Listed {
            name: name.clone(),
            kind: Kind::Native,
            file: None,
            grant: None,
            problem: None,
        })
        .collect();
    natives.sort_by(|a, b| a.name.cmp(&b.name));
    components.into_values().chain(natives).collect()
}

fn listed(loader: &Loader, name: &str, kind: Kind, problem: Option<String>) -> Listed {
    Listed {
        name: name.to_owned(),
        kind,
        file: None,
        grant: Some(loader.grant_source(name, None)),
        problem,
    }
}
