//! The `service-runtime` binary: the command line is in the library (`cli`).

fn main() -> std::process::ExitCode {
    service_runtime::cli::main()
}
