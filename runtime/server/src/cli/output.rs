//! What commands print on stdout. A reader that went away (`| head`) ends the command quietly,
//! as it ends Unix tools, instead of a panic ("failed printing to stdout") or an error line.

use std::io::Write;

/// Stdout was closed by its reader.
#[derive(Debug, thiserror::Error)]
#[error("stdout was closed by its reader")]
pub(super) struct Closed;

/// A failed write to stdout, with a closed pipe told apart.
pub(super) fn failed(e: std::io::Error) -> anyhow::Error {
    match e.kind() {
        std::io::ErrorKind::BrokenPipe => Closed.into(),
        _ => anyhow::Error::new(e).context("cannot write to stdout"),
    }
}

/// Writes `text` to stdout at once.
pub(super) fn print(text: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(text)
        .and_then(|()| out.flush())
        .map_err(failed)
}

/// Whether `error` is stdout closed by its reader.
pub(super) fn is_closed(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.is::<Closed>())
}

/// Ends the process as a closed pipe ends Unix tools: by SIGPIPE, without a word.
pub(super) fn end_quietly() -> ! {
    // SAFETY: restoring a signal's default action and raising it touch no Rust state; the
    // process ends at the raise (the exit below only satisfies the type).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    std::process::exit(141)
}

/// `println!` for commands: `outln!(...)?` ends the command quietly once stdout is closed.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::output::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for commands, as [`outln`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::print(format_args!($($arg)*))
    };
}
