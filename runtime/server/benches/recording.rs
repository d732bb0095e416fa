//! `cargo bench -p service-runtime --bench recording`
//!
//! What recording costs a live call: one request to a trivial route (a fresh instance each, as
//! the server does) with `record = "off"`, `"errors"` (the default: every call taped in memory,
//! none written, as none fails) and `"all"` (every call taped and written to the database after
//! its answer), in this process, rounds alternating, three adapters per mode (the median one
//! counts: see `COPIES`). The Rust guest (`echo`, whose route makes
//! one import) and the Python one (`python-echo`, an interpreter that reads the clocks and
//! random bytes as it starts). Target: `"all"` at most 1.15x `"off"`.
//!
//! Then a neighbour: the Rust guest with `"off"`, timed while another adapter (the Python
//! guest) serves a closed loop of its own with `"off"`, then with `"all"` (each of its calls
//! written). The ratio is what the other's recording costs the neighbour, its load aside.
//!
//! Then shadowing: each guest with `"off"`, against the same with a shadow build of itself on
//! every call (`shadow_percent` 100, the default), at the default `shadow_duty_percent` (10)
//! and at 100, three adapters a side (the median one counts): the live call's latency, and how
//! many calls the shadow was run on and how many it skipped (busy or resting). Target: the live
//! call at most 1.15x at the default duty.

// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
use stats::{ms, verdict};

use service_runtime::app::{App, Role};

// Shared with the guest languages bench, which uses all of it.
#[allow(dead_code)]
#[path = "shared/trivial_route.rs"]
mod trivial_route;
use trivial_route::{CALLS, load, measure, median, through_project};

// The tests' guest builders.
#[allow(dead_code)]
#[path = "../../../tests/e2e/guests.rs"]
mod guests;
// The one way tests and benches wait (each bench uses a part of it).
#[allow(dead_code)]
#[path = "../../../tests/shared/wait.rs"]
mod wait;

const ROUNDS: usize = 5;
/// Adapters loaded per mode: a loaded adapter's instances keep their memory slots, and a slot
/// can make every call of its adapter slower (seen up to 1.6x for the trivial Rust route, in
/// any mode), so each mode's figure is its median copy's.
const COPIES: usize = 3;
const MODES: [&str; 3] = ["off", "errors", "all"];

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let app = App::open(tmp.path(), Role::Server).await.unwrap();
        println!(
            "one request to a trivial route, a fresh instance each ({CALLS} sequential, the \
             median of {ROUNDS} alternating rounds; {COPIES} adapters per mode, the median one), \
             by `record`:"
        );
        let mut worst = 0.0f64;
        for (label, wasm, path) in [
            ("Rust (echo)", guests::guest("echo")),
            ("Python (python-echo)", guests::python_echo()),
        ]
        .map(|(label, wasm)| (label, wasm, "/hello"))
        {
            let name = wasm.file_stem().unwrap().to_str().unwrap().to_owned();
            let mut loaded = Vec::new();
            for copy in 0..COPIES {
                for mode in MODES {
                    let grant = format!("record = \"{mode}\"");
                    let file = format!("{name}-{mode}-{copy}");
                    loaded.push(load(&app, &wasm, &file, &grant).await);
                }
            }
            let mut rounds = vec![Vec::new(); loaded.len()];
            for _ in 0..ROUNDS {
                for (guest, round) in loaded.iter().zip(&mut rounds) {
                    round.push(measure(|| through_project(guest, path)).await);
                }
            }
            // Each mode's copies, in load order: copy `c` of mode `m` is `c * MODES + m`.
            let p50s: Vec<f64> = rounds.into_iter().map(|r| ms(median(r).0)).collect();
            let copies = |m: usize| -> Vec<f64> {
                let mut each: Vec<f64> =
                    p50s.iter().skip(m).step_by(MODES.len()).copied().collect();
                each.sort_by(f64::total_cmp);
                each
            };
            let [off, errors, all] = [0, 1, 2].map(copies);
            let middle = |each: &[f64]| each[each.len() / 2];
            let (errors_x, all_x) = (middle(&errors) / middle(&off), middle(&all) / middle(&off));
            worst = worst.max(all_x);
            let spread = |each: &[f64]| format!("{:.3}-{:.3}", each[0], each[each.len() - 1]);
            println!(
                "  {label:22} off {:.3} ms   errors {:.3} ms ({errors_x:.2}x)   all {:.3} ms \
                 ({all_x:.2}x)   (copies: off {}, errors {}, all {})",
                middle(&off),
                middle(&errors),
                middle(&all),
                spread(&off),
                spread(&errors),
                spread(&all),
            );
        }
        println!(
            "  target: \"all\" at most 1.15x \"off\": worst {worst:.2}x, {}",
            verdict(worst <= 1.15)
        );
        neighbour(&app).await;
        shadowing(&app).await;
        std::process::exit(0);
    });
}

/// The Rust guest's latency while the Python guest is kept busy, recording nothing, then
/// everything.
async fn neighbour(app: &App) {
    let echo = guests::guest("echo");
    let python = guests::python_echo();
    let neighbour = load(app, &echo, "neighbour", "record = \"off\"").await;
    let busy: Vec<_> = [("off", "busy-off"), ("all", "busy-all")]
        .into_iter()
        .map(|(mode, name)| (mode, name, format!("record = \"{mode}\"")))
        .collect();
    let mut loaded = Vec::new();
    for (mode, name, grant) in &busy {
        loaded.push((
            *mode,
            std::sync::Arc::new(load(app, &python, name, grant).await),
        ));
    }
    let mut rounds: Vec<Vec<_>> = vec![Vec::new(); loaded.len()];
    for _ in 0..ROUNDS {
        for ((_, other), round) in loaded.iter().zip(&mut rounds) {
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let load_loop = tokio::spawn({
                let (other, stop) = (std::sync::Arc::clone(other), std::sync::Arc::clone(&stop));
                async move {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        through_project(&other, "/hello").await;
                    }
                }
            });
            round.push(measure(|| through_project(&neighbour, "/hello")).await);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            load_loop.await.unwrap();
        }
    }
    let figures: Vec<_> = rounds.into_iter().map(median).collect();
    let (off, all) = (figures[0], figures[1]);
    println!(
        "  a neighbour (Rust, off) beside a busy Python adapter: p50 {:.3} / p99 {:.3} ms while \
         it records nothing, {:.3} / {:.3} ms while it records everything ({:.2}x / {:.2}x)",
        ms(off.0),
        ms(off.1),
        ms(all.0),
        ms(all.1),
        ms(all.0) / ms(off.0),
        ms(all.1) / ms(off.1),
    );
}

/// Each guest's live call with a shadow build of itself beside it, against none: with the
/// shadow's default duty (at most 10% of the time), and with no bound. Both sides are
/// `COPIES` adapters each, the median copy counting, as the recording's modes are.
async fn shadowing(app: &App) {
    println!(
        "a live call with a shadow build on every call (shadow_percent 100), against none \
         ({CALLS} sequential, the median of {ROUNDS} alternating rounds; {COPIES} adapters a \
         side, the median one):"
    );
    let mut worst = 0.0f64;
    for (label, wasm) in [
        ("Rust (echo)", guests::guest("echo")),
        ("Python (python-echo)", guests::python_echo()),
    ] {
        let name = wasm.file_stem().unwrap().to_str().unwrap().to_owned();
        let mut alone = Vec::new();
        for copy in 0..COPIES {
            let file = format!("{name}-alone-{copy}");
            alone.push(load(app, &wasm, &file, "record = \"off\"").await);
        }
        for duty in [10, 100] {
            let grant = format!("record = \"off\"\n[limits]\nshadow_duty_percent = {duty}\n");
            // The copies are one adapter by name, whose counts they add to: from none.
            let adapter = alone[0].name.clone();
            let forgotten = adapter.clone();
            app.db
                .call(move |conn| service_runtime::shadows::end(conn, &forgotten))
                .await
                .unwrap();
            let mut shadowed = Vec::new();
            for copy in 0..COPIES {
                let file = format!("{name}-shadowed-{duty}-{copy}");
                let live = load(app, &wasm, &file, &grant).await;
                let parsed = service_runtime::wasm::grants::Grant::parse(&grant).unwrap();
                let bytes = std::fs::read(&wasm).unwrap();
                app.components.shadow(&live, bytes, parsed).await.unwrap();
                shadowed.push(live);
            }
            let mut rounds = vec![Vec::new(); 2 * COPIES];
            for _ in 0..ROUNDS {
                let sides = alone.iter().chain(&shadowed);
                for (guest, round) in sides.zip(&mut rounds) {
                    round.push(measure(|| through_project(guest, "/hello")).await);
                }
            }
            let mut figures: Vec<_> = rounds.into_iter().map(median).collect();
            let shadowed_figures = figures.split_off(COPIES);
            let [alone_side, shadowed_side] = [figures, shadowed_figures].map(|mut side| {
                side.sort();
                side[side.len() / 2]
            });
            let (p50, p99) = (
                ms(shadowed_side.0) / ms(alone_side.0),
                ms(shadowed_side.1) / ms(alone_side.1),
            );
            if duty == 10 {
                worst = worst.max(p50);
            }
            // Its counts are written once a second.
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            let counts = app
                .db
                .call(move |conn| service_runtime::shadows::get(conn, &adapter))
                .await
                .unwrap()
                .unwrap();
            println!(
                "  {label:22} duty {duty:3}%   alone p50 {:.3} / p99 {:.3} ms   shadowed {:.3} / \
                 {:.3} ms ({p50:.2}x / {p99:.2}x)   the shadows: {} compared, {} matched, {} \
                 skipped",
                ms(alone_side.0),
                ms(alone_side.1),
                ms(shadowed_side.0),
                ms(shadowed_side.1),
                counts.compared,
                counts.matched,
                counts.skipped,
            );
        }
    }
    println!(
        "  target: the live call at most 1.15x at the default duty: worst p50 {worst:.2}x, {}",
        verdict(worst <= 1.15)
    );
}
