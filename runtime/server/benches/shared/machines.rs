//! Machines simulated on this one, for the replicas bench's `machines` mode. Each machine is a
//! network namespace on a bridge (its own address and network stack), its own cores (the
//! affinity of what it starts) and, when given, a CPU budget (a cgroup v1 CFS quota: a part of
//! a core, as a smaller machine has). Between them, a link that holds every byte a fixed time
//! each way: this kernel has no `netem` queueing discipline (`CONFIG_NET_SCH_NETEM` is off), so
//! the latency is added by a relay in user space. Needs root. What is made here is removed when
//! the [`Lan`] is dropped, and a killed bench's leftovers when the next one starts.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BRIDGE: &str = "srbench0";
/// Prefix of the namespaces, links and cgroups made here.
const PREFIX: &str = "srbench";
const CGROUPS: &str = "/sys/fs/cgroup/cpu";
/// A CFS period of 10 ms: a budget spent early in a period stalls its machine for at most the
/// rest of it (100 ms by default would show up in every latency figure).
const PERIOD_US: u64 = 10_000;

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("`ip` (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn kill(pids: &str) {
    for pid in pids.split_whitespace() {
        let _ = Command::new("kill").args(["-KILL", pid]).output();
    }
}

/// Removes what a bench made (now, or before it was killed: then its servers may still run
/// on the machines, and go first).
fn clean() {
    let _ = Command::new("ip").args(["link", "del", BRIDGE]).output();
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or_default();
            if name.starts_with(PREFIX) {
                if let Ok(pids) = Command::new("ip").args(["netns", "pids", name]).output() {
                    kill(&String::from_utf8_lossy(&pids.stdout));
                }
                let _ = Command::new("ip").args(["netns", "del", name]).output();
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(CGROUPS) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(PREFIX) {
                kill(
                    &std::fs::read_to_string(entry.path().join("cgroup.procs")).unwrap_or_default(),
                );
                // A killed process leaves its cgroup once it has been reaped.
                for _ in 0..50 {
                    if std::fs::remove_dir(entry.path()).is_ok() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

/// The bridge the machines are on, at 10.88.0.1/24 in this process's own network, where the
/// bench, its fakes and its links live.
pub struct Lan {
    machines: u8,
}

impl Lan {
    pub fn new() -> Self {
        clean();
        ip(&["link", "add", BRIDGE, "type", "bridge"]);
        ip(&["addr", "add", "10.88.0.1/24", "dev", BRIDGE]);
        ip(&["link", "set", BRIDGE, "up"]);
        Self { machines: 0 }
    }

    /// This process's address on the bridge.
    pub fn gateway(&self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 88, 0, 1))
    }

    /// A machine `name` (a few letters) with cores `cpus`, of which it may use `budget` cores'
    /// worth when one is given.
    pub fn machine(&mut self, name: &str, cpus: &[usize], budget: Option<f64>) -> Machine {
        self.machines += 1;
        let address = Ipv4Addr::new(10, 88, 0, 10 + self.machines);
        let netns = format!("{PREFIX}-{name}");
        let (outside, inside) = (format!("srbo-{name}"), format!("srbi-{name}"));
        ip(&["netns", "add", &netns]);
        ip(&[
            "link", "add", &outside, "type", "veth", "peer", "name", &inside,
        ]);
        ip(&["link", "set", &outside, "master", BRIDGE, "up"]);
        ip(&["link", "set", &inside, "netns", &netns]);
        let cidr = format!("{address}/24");
        ip(&["-n", &netns, "addr", "add", &cidr, "dev", &inside]);
        ip(&["-n", &netns, "link", "set", &inside, "up"]);
        ip(&["-n", &netns, "link", "set", "lo", "up"]);
        let cgroup = budget.map(|cores| {
            // The kernel refuses a quota under 1 ms.
            assert!(cores >= 0.1, "a budget of at least 0.1 core, not {cores}");
            let dir = PathBuf::from(CGROUPS).join(&netns);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("cpu.cfs_period_us"), PERIOD_US.to_string()).unwrap();
            let quota = (cores * PERIOD_US as f64) as u64;
            std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()).unwrap();
            dir
        });
        Machine {
            address: IpAddr::V4(address),
            netns,
            cpus: cpus.to_vec(),
            cgroup,
        }
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        clean();
    }
}

/// A simulated machine: what a thread that entered it starts runs there.
#[derive(Clone)]
pub struct Machine {
    pub address: IpAddr,
    netns: String,
    cpus: Vec<usize>,
    cgroup: Option<PathBuf>,
}

impl Machine {
    /// Moves the calling thread into the machine's network namespace and onto its cores; what
    /// it starts from then on inherits both.
    pub fn enter(&self) {
        let namespace = File::open(format!("/run/netns/{}", self.netns)).unwrap();
        // SAFETY: a valid descriptor of a network namespace; affects the calling thread only.
        let entered = unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
        pin_current_thread(&self.cpus);
    }

    /// [`Self::enter`] as a closure for code that starts servers on a thread of its own.
    pub fn entrance(&self) -> Arc<dyn Fn() + Send + Sync> {
        let machine = self.clone();
        Arc::new(move || machine.enter())
    }

    /// Runs `start` on a thread that entered the machine: what it starts runs there.
    pub fn run<T: Send>(&self, start: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    self.enter();
                    start()
                })
                .join()
                .unwrap()
        })
    }

    /// Puts process `pid` (all its threads) under the machine's CPU budget, if it has one.
    pub fn limit(&self, pid: u32) {
        if let Some(cgroup) = &self.cgroup {
            std::fs::write(cgroup.join("cgroup.procs"), pid.to_string()).unwrap();
        }
    }
}

/// Keeps the calling thread (and what it starts) on `cpus`.
pub fn pin_current_thread(cpus: &[usize]) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in cpus {
        unsafe { libc::CPU_SET(*cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; the set is initialised and sized.
    let pinned = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(
        pinned,
        0,
        "sched_setaffinity: {}",
        std::io::Error::last_os_error()
    );
}

/// A link on `listen` (any free port) to `to` that holds each chunk `one_way` in each
/// direction, so a round trip through it takes `2 × one_way` longer than one through the
/// bridge. Its threads live as long as the process.
pub fn slow_link(listen: IpAddr, to: SocketAddr, one_way: Duration) -> SocketAddr {
    let listener = TcpListener::bind((listen, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(to) else {
                continue;
            };
            for stream in [&client, &server] {
                stream.set_nodelay(true).unwrap();
            }
            relay(
                client.try_clone().unwrap(),
                server.try_clone().unwrap(),
                one_way,
            );
            relay(server, client, one_way);
        }
    });
    addr
}

/// Copies `from` to `to`, each chunk written `delay` after it was read: a reader thread and a
/// writer thread, so a chunk in flight never holds the next one back.
fn relay(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buffer = vec![0; 64 * 1024];
        while let Ok(read @ 1..) = from.read(&mut buffer) {
            if chunks
                .send((Instant::now() + delay, buffer[..read].to_vec()))
                .is_err()
            {
                break;
            }
        }
    });
    std::thread::spawn(move || {
        // Sleeps end on time, not up to 50 µs late (the default slack).
        // SAFETY: prctl with an integer argument.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        while let Ok((at, chunk)) = due.recv() {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
