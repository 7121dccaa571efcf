//! `mirrorgate mirrors`: the operator tool for KIP-1279 cluster mirrors (§10.1's
//! `kafka-cluster-mirrors.sh`), talking the Kafka protocol to a mirrorgate listener that serves
//! the mirror admin RPCs. It sends ApiVersions first, checks the mirror api keys (from
//! [`MirrorApiTable`]'s defaults) are advertised, then sends the action's requests.
//!
//! Layout: [`args`] validates flags into an [`args::Invocation`]; [`props`] parses the
//! properties files; [`transport`] frames requests and talks to the socket; [`actions`] runs an
//! action and builds a [`actions::Report`]; [`output`] renders tables, JSON and error lines.
//! Never prints the value of a config key containing `password` or `sasl.jaas.config`.

mod actions;
mod args;
mod output;
mod props;
mod transport;
mod verify;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args as _, Command};

pub use args::MirrorsArgs;

use actions::Report;
use args::Action;
use props::{CommandConfig, Properties};
use transport::{AdminConnection, Timeouts};

/// `client.id` used when `--command-config` does not set one.
const DEFAULT_CLIENT_ID: &str = "mirrorgate-mirrors";
/// TCP connect timeout per bootstrap address.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Timeout of one request; above StartMirrorTopics' `TimeoutMs` so the server answers first.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(actions::START_TIMEOUT_MS as u64 + 5_000);

/// Exit status of a usage or configuration-file error.
const USAGE: u8 = 2;

/// Prints a usage error the way clap does (with the usage line) and returns exit status 2.
fn usage_error(message: impl std::fmt::Display) -> ExitCode {
    let mut cmd = MirrorsArgs::augment_args(Command::new("mirrors")).bin_name("mirrorgate mirrors");
    let _ = cmd.error(ErrorKind::ArgumentConflict, message).print();
    ExitCode::from(USAGE)
}

/// A configuration-file error: printed without the usage line, exit status 2.
fn config_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("mirrorgate mirrors: {message}");
    ExitCode::from(USAGE)
}

/// Runs `mirrorgate mirrors`: 0 on success, 1 if a call failed, 2 for usage and
/// configuration-file errors.
pub fn main(args: MirrorsArgs) -> ExitCode {
    let inv = match args.validate() {
        Ok(i) => i,
        Err(e) => return usage_error(e),
    };
    let command_config = match &inv.command_config {
        None => CommandConfig::default(),
        Some(path) => {
            match Properties::load(path).and_then(|p| CommandConfig::from_properties(&p).map_err(|e| e.in_file(path))) {
                Ok(c) => c,
                Err(e) => return config_error(e),
            }
        }
    };
    let mirror_config = match &inv.action {
        Action::Create { mirror_config, .. } => match Properties::load(mirror_config) {
            Ok(p) if p.get("bootstrap.servers").is_none_or(|v| v.trim().is_empty()) => {
                return config_error(format!(
                    "{}: bootstrap.servers is required (the source cluster's bootstrap servers)",
                    mirror_config.display()
                ))
            }
            Ok(p) => Some(p),
            Err(e) => return config_error(e),
        },
        _ => None,
    };

    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("Error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let client_id = command_config.client_id.as_deref().unwrap_or(DEFAULT_CLIENT_ID);
    let result = runtime.block_on(async {
        let timeouts = Timeouts { connect: CONNECT_TIMEOUT, request: REQUEST_TIMEOUT };
        let needed = actions::needed_apis(&inv.action);
        let mut conn = AdminConnection::open(
            &inv.bootstrap,
            client_id,
            timeouts,
            command_config.api_keys.clone(),
            &needed,
            &command_config.security,
        )
        .await?;
        actions::execute(&mut conn, &inv.action, mirror_config.as_ref()).await
    });
    match result {
        Ok(report) => print_report(&report),
        Err(e) => {
            let secrets = mirror_config.as_ref().map(Properties::secrets).unwrap_or_default();
            eprintln!("Error: {}", props::redact(&format!("{e:#}"), &secrets));
            ExitCode::FAILURE
        }
    }
}

fn print_report(report: &Report) -> ExitCode {
    print!("{}", report.stdout);
    for line in &report.stderr {
        eprintln!("{line}");
    }
    if report.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
