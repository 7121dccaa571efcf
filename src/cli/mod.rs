//! Command line: `run` starts the proxy; `mirrors` manages KIP-1279 cluster mirrors.

mod mirrors;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use mirrorgate::config::ProxyConfig;
use tokio_util::sync::CancellationToken;

/// mirrorgate: a Kafka-protocol proxy that gives any Kafka cluster KIP-1279 cluster mirroring.
#[derive(Debug, Parser)]
#[command(name = "mirrorgate", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the proxy in front of the destination cluster.
    Run {
        /// Path of the YAML configuration (see proxy.yaml in the repository). Keys can be
        /// overridden with MIRRORGATE__SECTION__KEY environment variables.
        #[arg(long, short, default_value = "proxy.yaml")]
        config: PathBuf,
        /// Validate the configuration and exit.
        #[arg(long)]
        check: bool,
        /// How long to wait for the destination cluster at startup, in seconds.
        #[arg(long, default_value_t = 60)]
        startup_timeout_secs: u64,
    },
    /// Manage KIP-1279 cluster mirrors through a mirrorgate listener (like kafka-cluster-mirrors.sh).
    Mirrors(mirrors::MirrorsArgs),
}

/// Parses arguments and runs the chosen command.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { config, check, startup_timeout_secs } => run(config, check, startup_timeout_secs),
        Command::Mirrors(args) => mirrors::main(args),
    }
}

fn run(path: PathBuf, check: bool, startup_timeout_secs: u64) -> ExitCode {
    let settings = match ProxyConfig::load(&path).and_then(ProxyConfig::validate) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mirrorgate: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    if check {
        println!("{}: configuration is valid", path.display());
        return ExitCode::SUCCESS;
    }
    mirrorgate::telemetry::init_logging(&settings.log);
    if settings.traces.is_some() {
        // `traces.headers` already holds these, merged under the explicit headers; the OTLP
        // exporter would read them again and let them override the explicit ones. Removed
        // while the process is still single-threaded.
        for var in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            std::env::remove_var(var);
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mirrorgate: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let _traces = match settings.traces.as_ref().map(mirrorgate::telemetry::traces::install).transpose() {
            Ok(guard) => guard,
            Err(e) => {
                eprintln!("mirrorgate: {e}");
                return ExitCode::FAILURE;
            }
        };
        let shutdown = CancellationToken::new();
        let s = shutdown.clone();
        tokio::spawn(async move {
            let reason = wait_for_signal().await;
            tracing::info!("{reason} received, shutting down");
            s.cancel();
        });
        match mirrorgate::proxy::run(settings, Vec::new(), Duration::from_secs(startup_timeout_secs), shutdown).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!("{e:#}");
                eprintln!("mirrorgate: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Waits for Ctrl-C (SIGINT) or SIGTERM (`docker stop`, systemd, Kubernetes).
async fn wait_for_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "interrupt",
                _ = term.recv() => "SIGTERM",
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                "interrupt"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "interrupt"
    }
}
