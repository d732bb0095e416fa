//! Stdio MCP servers as child processes that never outlive the runtime.
//!
//! A server's program runs under a guard: this same binary (`service-runtime mcp-guard`),
//! started as the leader of a process group of its own. The guard starts the program in that
//! group and watches the runtime through a pidfd; when the runtime is gone, however it ended
//! (kill -9 included), the guard kills the whole group, the program's own children too. When
//! the runtime stops a server it kills the group itself. A parent-death signal alone would not
//! do: it follows the thread that spawned the child, and it reaches only that child.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::{ExitCode, Stdio};

use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// Variables a server's program gets from the runtime's environment; the rest (API keys
/// among them) stay with the runtime. Its entry's `env` comes on top.
const PASSED_ON: &[&str] = &["PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR"];

/// A server's program, running under its guard. Dropping it kills the process group.
pub struct Guarded {
    child: Child,
    group: libc::pid_t,
}

/// A started program and its standard streams.
pub struct Spawned {
    pub process: Guarded,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

/// Starts `program` under a guard with `env` added to the variables passed on.
pub fn spawn(
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
) -> std::io::Result<Spawned> {
    let mut command = Command::new("/proc/self/exe");
    command
        .arg("mcp-guard")
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--")
        .arg(program)
        .args(args)
        .env_clear()
        .envs(
            PASSED_ON
                .iter()
                .filter_map(|name| Some((name, std::env::var_os(name)?))),
        )
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let group = child
        .id()
        .and_then(|id| libc::pid_t::try_from(id).ok())
        .ok_or_else(|| std::io::Error::other("the guard exited at once"))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("the guard's pipes were not set up"));
    };
    Ok(Spawned {
        process: Guarded { child, group },
        stdin,
        stdout,
        stderr,
    })
}

impl Guarded {
    /// Waits for the guard to end (it ends when the program does).
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: a plain syscall on the group this process created and still owns (the guard
        // is not reaped before this drop, so its id cannot have been reused).
        unsafe { libc::kill(-self.group, libc::SIGKILL) };
    }
}

/// `service-runtime mcp-guard --parent PID -- PROGRAM ARGS...`: runs the program in this
/// process's group until it ends or `parent` does, then kills the group.
pub fn guard(parent: u32, command: &[OsString]) -> ExitCode {
    let Some((program, args)) = command.split_first() else {
        eprintln!("mcp-guard: no program given");
        return ExitCode::FAILURE;
    };
    let Ok(parent) = libc::pid_t::try_from(parent) else {
        return ExitCode::FAILURE;
    };
    // SAFETY: getppid and pidfd_open take no pointers.
    let pidfd = unsafe {
        if libc::getppid() != parent {
            // The runtime ended before the guard was up.
            return ExitCode::FAILURE;
        }
        libc::syscall(libc::SYS_pidfd_open, parent, 0)
    };
    let mut child = match std::process::Command::new(program).args(args).spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!("mcp-guard: cannot start {}: {e}", program.to_string_lossy());
            return ExitCode::FAILURE;
        }
    };
    std::thread::spawn(move || {
        wait_for_exit(parent, pidfd as libc::c_int);
        kill_group();
    });
    match child.wait() {
        Ok(status) => eprintln!("mcp-guard: {} exited: {status}", program.to_string_lossy()),
        Err(e) => eprintln!("mcp-guard: cannot wait for the program: {e}"),
    }
    // Whatever the program left behind goes with it.
    kill_group();
    ExitCode::FAILURE
}

/// Returns once `parent` has exited: the pidfd becomes readable then (or, on kernels without
/// pidfds, this process is re-parented).
fn wait_for_exit(parent: libc::pid_t, pidfd: libc::c_int) {
    loop {
        if pidfd >= 0 {
            let mut poll = libc::pollfd {
                fd: pidfd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, for its length.
            if unsafe { libc::poll(&mut poll, 1, -1) } == 1 {
                return;
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(200));
            // SAFETY: no arguments.
            if unsafe { libc::getppid() } != parent {
                return;
            }
        }
    }
}

fn kill_group() {
    // SAFETY: signals this process's own group, the guard included.
    unsafe { libc::kill(0, libc::SIGKILL) };
}
