//! The book's command-line reference (`docs/src/reference/cli.md`) is written from the `clap`
//! definitions: this test fails when the two differ, and `UPDATE_DOCS=1` rewrites the page.

use clap::CommandFactory;

use super::Cli;

const PAGE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/src/reference/cli.md"
);

/// `command` with no argument showing the value its variable has where the test runs.
fn without_env_values(command: clap::Command) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    let mut command = command.mut_args(|arg| arg.hide_env_values(true));
    for name in names {
        command = command.mut_subcommand(name, without_env_values);
    }
    command
}

/// Every command's long help, depth first, under its full name.
fn render(command: &mut clap::Command, name: &str, page: &mut String) {
    let help = command.render_long_help().to_string();
    let help: Vec<&str> = help.lines().map(str::trim_end).collect();
    page.push_str(&format!(
        "\n## `{name}`\n\n```text\n{}\n```\n",
        help.join("\n").trim_end()
    ));
    for sub in command.get_subcommands_mut() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let full = format!("{name} {}", sub.get_name());
        render(sub, &full, page);
    }
}

#[test]
fn the_books_command_line_reference_is_the_binarys_own_help() {
    let mut command = without_env_values(Cli::command());
    command.build();
    let mut page = String::from(
        "# Command line\n\nEvery command's `--help`, written from the binary's own definitions \
         (`UPDATE_DOCS=1 cargo test -p service-runtime --lib cli::reference` rewrites this page; \
         the test fails while it differs). `--data-dir` (or `SERVICE_DATA_DIR`) works with every \
         command.\n",
    );
    render(&mut command, "service-runtime", &mut page);
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(PAGE, &page).unwrap();
    }
    let written = std::fs::read_to_string(PAGE).unwrap_or_default();
    assert!(
        written == page,
        "docs/src/reference/cli.md is out of date: run UPDATE_DOCS=1 cargo test -p \
         service-runtime --lib cli::reference"
    );
}
