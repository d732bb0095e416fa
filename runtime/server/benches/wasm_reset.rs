//! `cargo bench -p service-runtime --bench wasm_reset`
//!
//! One request to each guest's trivial route (a fresh instance each, in this process) with each
//! way `[sandbox]` in config.toml lets a freed instance's memory slot be made ready for the next,
//! against the defaults, in one run: the figures the defaults were chosen from.

// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
use stats::ms;

use service_runtime::app::{App, Role};

// The tests' guest builders.
#[allow(dead_code)]
#[path = "../../../tests/e2e/guests.rs"]
mod guests;
#[path = "shared/trivial_route.rs"]
mod trivial_route;
use trivial_route::{load, measure, median, through_project};

/// Each variant's `[sandbox]` section; the first is the defaults, the baseline.
const VARIANTS: &[(&str, &str)] = &[
    ("defaults", ""),
    (
        "large reset whole (as with swap)",
        "written_pages_only = false",
    ),
    ("nothing kept resident", "memory_keep_resident_kib = 0"),
    ("8 MiB kept resident", "memory_keep_resident_kib = 8192"),
    ("tables not kept resident", "table_keep_resident_kib = 0"),
    ("512 KiB of tables kept", "table_keep_resident_kib = 512"),
    ("no dense image", "dense_image_mib = 0"),
    ("decommits batched by 32", "decommit_batch = 32"),
];

const ROUNDS: usize = 3;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let guests = trivial_route::guests();
        // Every variant's app at once, so the rounds alternate between them (a slow moment of
        // a shared machine hits them all); each compiles its guests once.
        let mut apps = Vec::new();
        for (_, section) in VARIANTS {
            let data = tempfile::tempdir().unwrap();
            std::fs::write(
                data.path().join("config.toml"),
                format!("[sandbox]\n{section}\n"),
            )
            .unwrap();
            let app = App::open(data.path(), Role::Server).await.unwrap();
            let mut loaded = Vec::new();
            for (_, wasm, _) in &guests {
                let name = wasm.file_stem().unwrap().to_str().unwrap();
                loaded.push(load(&app, wasm, name, "").await);
            }
            apps.push((data, app, loaded));
        }
        // Per variant, per guest: each round's figures.
        let mut figures = vec![vec![Vec::new(); guests.len()]; VARIANTS.len()];
        for _ in 0..ROUNDS {
            for ((_, _, loaded), rows) in apps.iter().zip(&mut figures) {
                for ((guest, (_, _, path)), row) in loaded.iter().zip(&guests).zip(rows.iter_mut())
                {
                    row.push(measure(|| through_project(guest, path)).await);
                }
            }
        }
        println!(
            "one request to a trivial route, a fresh instance each, p50 in ms (the median of \
             {ROUNDS} rounds), by [sandbox] setting:"
        );
        print!("  {:34}", "");
        for (_, wasm, _) in &guests {
            print!(" {:>21}", wasm.file_stem().unwrap().to_str().unwrap());
        }
        println!();
        let p50s: Vec<Vec<f64>> = figures
            .into_iter()
            .map(|rows| rows.into_iter().map(|r| ms(median(r).0)).collect())
            .collect();
        for ((label, _), row) in VARIANTS.iter().zip(&p50s) {
            print!("  {label:34}");
            for (p50, base) in row.iter().zip(&p50s[0]) {
                print!(" {:>10.3} ({:5.2}x)", p50, p50 / base);
            }
            println!();
        }
        std::process::exit(0);
    });
}
