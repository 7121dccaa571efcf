//! The `mirrorgate` binary: `mirrorgate run --config proxy.yaml`.
#![forbid(unsafe_code)]

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
