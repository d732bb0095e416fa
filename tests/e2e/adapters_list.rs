//! `service-runtime adapters list` through the binary, without a server: every adapter the
//! server would load, bundled, file or native, with where it and its grant come from.

use crate::guests::guest;
use crate::support::cli;
use crate::wasm::ECHO_GRANT;

/// The row of `name` in the table, and the note under it if there is one.
fn row<'a>(listed: &'a str, name: &str) -> (&'a str, Option<&'a str>) {
    let mut lines = listed.lines();
    let row = lines
        .find(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row for {name}:\n{listed}"));
    let note = lines
        .next()
        .and_then(|line| line.trim_start().strip_prefix("! "));
    (row, note)
}

fn columns(row: &str) -> Vec<&str> {
    row.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn adapters_list_shows_bundled_files_overrides_and_natives() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let adapters = data_dir.join("adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    std::fs::write(
        data_dir.join("config.toml"),
        "[adapters.teamchat]\nkv = true\n",
    )
    .unwrap();
    let echo = std::fs::read(guest("echo")).unwrap();
    std::fs::write(adapters.join("echo.wasm"), &echo).unwrap();
    std::fs::write(adapters.join("echo.toml"), ECHO_GRANT).unwrap();
    // A file named like a bundled component overrides it; one named like a native adapter,
    // or not a valid name at all, would be refused.
    std::fs::write(adapters.join("webhook.wasm"), &echo).unwrap();
    std::fs::write(adapters.join("email.wasm"), &echo).unwrap();
    std::fs::write(adapters.join("no.good.wasm"), &echo).unwrap();
    // A grant alone is no adapter.
    std::fs::write(adapters.join("lonely.toml"), "kv = true\n").unwrap();

    let out = cli(&data_dir, &["adapters", "list"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        columns(listed.lines().next().unwrap()),
        ["NAME", "KIND", "FROM", "GRANT"]
    );
    let size = format!("({} bytes)", echo.len());

    let (echo_row, note) = row(&listed, "echo");
    assert_eq!(
        columns(echo_row),
        [
            "echo",
            "component",
            &format!("echo.wasm {size}"),
            "echo.toml"
        ]
    );
    assert_eq!(note, None);
    let (webhook, note) = row(&listed, "webhook");
    assert_eq!(
        columns(webhook),
        [
            "webhook",
            "bundled",
            &format!("webhook.wasm {size}, overriding the bundled one"),
            "none (the bundled default is the bundled one's)"
        ]
    );
    assert_eq!(note, None);
    for (name, grant) in [
        ("calendar", "bundled default"),
        ("teamchat", "config.toml"),
        ("voice", "bundled default"),
    ] {
        let (bundled, _) = row(&listed, name);
        assert_eq!(
            columns(bundled),
            [name, "bundled", "built into the binary", grant]
        );
    }
    for native in ["email", "guildchat", "scheduler"] {
        assert!(
            listed
                .lines()
                .any(|line| columns(line) == [native, "native", "built into the server", "-"]),
            "{native}:\n{listed}"
        );
    }
    // The email file is listed as a component the server refuses, below the native one.
    let email_file = listed
        .lines()
        .position(|line| line.starts_with("email ") && line.contains("email.wasm"))
        .unwrap_or_else(|| panic!("no row for email.wasm:\n{listed}"));
    assert!(
        listed
            .lines()
            .nth(email_file + 1)
            .unwrap()
            .contains("! \"email\" is the name of a native adapter: the file is refused"),
        "{listed}"
    );
    let (_, note) = row(&listed, "no.good");
    assert!(note.unwrap().contains("is not valid"), "{listed}");
    assert!(!listed.contains("lonely"), "{listed}");
    let names: Vec<&str> = listed
        .lines()
        .skip(1)
        .filter(|line| !line.starts_with(' '))
        .map(|line| line.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "calendar",
            "echo",
            "email",
            "no.good",
            "teamchat",
            "voice",
            "webhook",
            "email",
            "guildchat",
            "scheduler"
        ],
        "components by name, then native adapters"
    );
}
