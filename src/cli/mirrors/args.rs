//! The flags of `mirrorgate mirrors` (the shape of KIP-1279 §10.1's `kafka-cluster-mirrors.sh`)
//! and their validation into one typed [`Invocation`]. Pure: reads no file and opens no socket.

use std::path::PathBuf;

use clap::Args;
use regex::Regex;

/// Examples shown at the end of `mirrorgate mirrors --help`.
const EXAMPLES: &str = "\
Examples:
  mirrorgate mirrors --bootstrap-server mg:9094 --create --mirror a-to-b --mirror-config a-to-b.properties
  mirrorgate mirrors --bootstrap-server mg:9094 --start --mirror a-to-b --topics 'orders.*,payments' --exclude 'orders\\.tmp.*'
  mirrorgate mirrors --bootstrap-server mg:9094 --describe --mirror a-to-b --failed
  mirrorgate mirrors --bootstrap-server mg:9094 --stop --mirror a-to-b --topics '.*'     # failover

Exit status: 0 on success, 1 if the server reports an error (or cannot be reached), 2 for usage
and configuration-file errors.";

/// `mirrorgate mirrors`: manage KIP-1279 cluster mirrors through a mirrorgate admin listener.
#[derive(Debug, Clone, Default, Args)]
#[command(
    about = "Manage KIP-1279 cluster mirrors (like kafka-cluster-mirrors.sh)",
    long_about = "Manage KIP-1279 cluster mirrors on the destination, through a mirrorgate listener that \
                  serves the mirror admin RPCs (like kafka-cluster-mirrors.sh). Give exactly one action.",
    after_help = EXAMPLES
)]
pub struct MirrorsArgs {
    /// The destination: a mirrorgate listener with mirror admin RPCs enabled, as HOST:PORT
    /// (a comma-separated list is tried in order).
    #[arg(long, value_name = "HOST:PORT", required = true)]
    pub bootstrap_server: Option<String>,

    /// Client settings for the connection to the mirrorgate listener (properties file): the
    /// Java client's security.protocol, sasl.*, ssl.* (TLS to a TLS listener; SASL is checked by
    /// the destination broker), client.id, mirror.api.key.<rpc>.
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<PathBuf>,

    /// Create a mirror (needs --mirror and --mirror-config).
    #[arg(long, help_heading = "Actions (exactly one)")]
    pub create: bool,
    /// Start mirroring topics (needs --mirror and --topics; optional --exclude).
    #[arg(long, help_heading = "Actions (exactly one)")]
    pub start: bool,
    /// Stop mirroring topics: failover, the topics become writable (needs --mirror and --topics).
    #[arg(long, help_heading = "Actions (exactly one)")]
    pub stop: bool,
    /// Pause mirroring topics; they stay read-only (needs --mirror and --topics).
    #[arg(long, help_heading = "Actions (exactly one)")]
    pub pause: bool,
    /// Resume paused topics (needs --mirror and --topics).
    #[arg(long, help_heading = "Actions (exactly one)")]
    pub resume: bool,
    /// List the mirrors: MIRROR, TOPICS (count), SOURCE-CLUSTER-ID, SOURCE-BOOTSTRAP-SERVER.
    #[arg(long, help_heading = "Actions (exactly one)")]
    pub list: bool,
    /// Describe per-partition state and lag of all mirrors, or of --mirror.
    #[arg(long, help_heading = "Actions (exactly one)")]
    pub describe: bool,
    /// Delete a mirror; it must have no active or non-stopped topics (needs --mirror).
    #[arg(long, help_heading = "Actions (exactly one)")]
    pub delete: bool,
    /// Compare source and destination partition by partition (offsets, records, payload
    /// bytes) and report the first difference (needs --mirror; optional --topics). Run it
    /// before a failover, when the lag is 0.
    #[arg(long, help_heading = "Actions (exactly one)")]
    pub verify: bool,

    /// The mirror name. Required except with --list (not allowed) and --describe (optional).
    #[arg(long, value_name = "NAME")]
    pub mirror: Option<String>,
    /// Source connection and mirror settings for --create (properties file; must set
    /// bootstrap.servers). Values of keys containing 'password' or 'sasl.jaas.config' are never
    /// printed.
    #[arg(long, value_name = "FILE")]
    pub mirror_config: Option<PathBuf>,
    /// Comma-separated topic names and regular expressions (full match), e.g. 'a,orders.*'.
    /// With --start the patterns are saved for auto-discovery; with --stop/--pause/--resume they
    /// select among the mirror's current topics.
    #[arg(long, value_name = "LIST")]
    pub topics: Option<String>,
    /// Comma-separated regular expressions of topics never to mirror (only with --start; they
    /// win over --topics).
    #[arg(long, value_name = "LIST")]
    pub exclude: Option<String>,
    /// Print --describe as a JSON array (keys mirror, topic, partition, sourceOffset,
    /// destinationOffset, lag, state, retryAttempt, errorMessage).
    #[arg(long)]
    pub json: bool,
    /// With --describe, show only FAILED partitions: MIRROR, TOPIC, PARTITION, RETRY (n/max or
    /// NonRetryable), ERROR.
    #[arg(long)]
    pub failed: bool,
    /// With --start: where the newly started topics (and those the saved patterns discover
    /// later) begin copying: `earliest` (the source's log start, the default), `latest` (only
    /// records produced from now on) or a timestamp in ms since the epoch (the first record at
    /// or after it; the end when there is none). Offsets below the start are never copied.
    #[arg(long, value_name = "POSITION")]
    pub start_position: Option<String>,
    /// With --stop: a planned failover. First wait until every partition of the selected topics
    /// is MIRRORING with lag 0 against the source high watermark (LAG-HW, so no open source
    /// transaction is left behind) in three reads over at least 2 s, then stop. Stop the
    /// producers on the source first. Gives up (nothing stopped, exit status 1) after SECONDS.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "300")]
    pub drain: Option<u64>,
    /// With --describe: refresh the table in place every SECONDS (default 2) with the copy
    /// rate per partition and totals (lag, records/s, states), until Ctrl-C.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "2")]
    pub watch: Option<u64>,
}

/// A misuse of the flags; printed with the usage line and exit status 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// How `--describe` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescribeFormat {
    /// Aligned columns MIRROR … STATE.
    Table,
    /// A JSON array of partition objects.
    Json,
}

/// The validated action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `--create`: CreateClusterMirror with the configs of `mirror_config`.
    Create {
        /// Mirror name.
        mirror: String,
        /// Path of the properties file.
        mirror_config: PathBuf,
    },
    /// `--start`: StartMirrorTopics with include/exclude patterns as given.
    Start {
        /// Mirror name.
        mirror: String,
        /// `--topics` entries (names or regexes).
        include: Vec<String>,
        /// `--exclude` entries (regexes).
        exclude: Vec<String>,
        /// `--start-position`, validated.
        start_position: Option<String>,
    },
    /// `--stop` / `--pause` / `--resume` of the mirror's topics matching `topics`.
    Topics {
        /// Which of the three.
        op: TopicOp,
        /// Mirror name.
        mirror: String,
        /// `--topics` entries (names or regexes).
        topics: Vec<String>,
        /// `--stop --drain`: wait for lag 0 first, for at most this long (s).
        drain_secs: Option<u64>,
    },
    /// `--list`: ListClusterMirrors.
    List,
    /// `--describe`: DescribeClusterMirrors.
    Describe {
        /// One mirror, or all.
        mirror: Option<String>,
        /// Table or JSON.
        format: DescribeFormat,
        /// Only FAILED partitions.
        failed_only: bool,
        /// `--watch`: refresh every this many seconds until Ctrl-C.
        watch_secs: Option<u64>,
    },
    /// `--delete`: DeleteClusterMirror.
    Delete {
        /// Mirror name.
        mirror: String,
    },
    /// `--verify`: compare the mirror's topics on source and destination.
    Verify {
        /// Mirror name.
        mirror: String,
        /// `--topics` entries (names or regexes); empty = every topic of the mirror.
        topics: Vec<String>,
    },
}

/// Stop, pause or resume: the three actions that act on a mirror's existing topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicOp {
    /// StopMirrorTopics (failover).
    Stop,
    /// PauseMirrorTopics.
    Pause,
    /// ResumeMirrorTopics.
    Resume,
}

/// Everything one run of `mirrorgate mirrors` needs, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// `host:port` addresses to try in order.
    pub bootstrap: Vec<String>,
    /// `--command-config`, not yet read.
    pub command_config: Option<PathBuf>,
    /// The action.
    pub action: Action,
}

/// Splits a comma-separated flag value into trimmed, non-empty entries.
fn split_list(flag: &str, value: &str) -> Result<Vec<String>, UsageError> {
    let items: Vec<String> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    if items.is_empty() {
        return Err(usage(format!("{flag} has no topic names or patterns")));
    }
    Ok(items)
}

/// Compiles each pattern as a full-match regular expression.
///
/// Errors: a [`UsageError`] naming the flag and the first invalid pattern.
pub fn compile_patterns(flag: &str, patterns: &[String]) -> Result<Vec<Regex>, UsageError> {
    patterns
        .iter()
        .map(|p| {
            Regex::new(&format!("^(?:{p})$"))
                .map_err(|e| usage(format!("{flag}: '{p}' is not a valid regular expression: {}", first_line(&e))))
        })
        .collect()
}

fn first_line(e: &regex::Error) -> String {
    let s = e.to_string();
    s.lines().last().unwrap_or_default().trim().trim_start_matches("error: ").to_string()
}

fn parse_bootstrap(value: &str) -> Result<Vec<String>, UsageError> {
    let addrs: Vec<String> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    if addrs.is_empty() {
        return Err(usage("--bootstrap-server is empty"));
    }
    for a in &addrs {
        let ok = a.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !ok {
            return Err(usage(format!("--bootstrap-server: '{a}' is not HOST:PORT")));
        }
    }
    Ok(addrs)
}

impl MirrorsArgs {
    /// Checks the flag combinations and builds the [`Invocation`].
    ///
    /// Rules: exactly one action; `--mirror` required except for `--list` (where it is
    /// rejected) and `--describe` (optional); `--mirror-config` only and always with
    /// `--create`; `--topics` only and always with start/stop/pause/resume; `--exclude` only
    /// with `--start`; `--json` / `--failed` only with `--describe`; patterns must be valid
    /// regular expressions.
    ///
    /// Errors: a [`UsageError`] describing the first rule broken.
    pub fn validate(&self) -> Result<Invocation, UsageError> {
        let flags = [
            ("--create", self.create),
            ("--start", self.start),
            ("--stop", self.stop),
            ("--pause", self.pause),
            ("--resume", self.resume),
            ("--list", self.list),
            ("--describe", self.describe),
            ("--delete", self.delete),
            ("--verify", self.verify),
        ];
        let chosen: Vec<&str> = flags.iter().filter(|(_, on)| *on).map(|(f, _)| *f).collect();
        let action = match chosen.as_slice() {
            [one] => *one,
            [] => {
                return Err(usage(
                    "give exactly one action: --create, --start, --stop, --pause, --resume, --list, --describe, \
                     --delete or --verify",
                ))
            }
            many => return Err(usage(format!("give exactly one action, not {}", many.join(" and ")))),
        };

        let bootstrap = parse_bootstrap(self.bootstrap_server.as_deref().unwrap_or_default())?;

        let mirror = match (action, self.mirror.as_deref().map(str::trim)) {
            ("--list", Some(_)) => {
                return Err(usage("--mirror is not used with --list (to see one mirror, use --describe --mirror NAME)"))
            }
            (_, Some("")) => return Err(usage("--mirror is empty")),
            ("--list" | "--describe", m) => m.map(String::from),
            (_, None) => return Err(usage(format!("{action} needs --mirror NAME"))),
            (_, Some(m)) => Some(m.to_string()),
        };

        match (action, &self.mirror_config) {
            ("--create", None) => {
                return Err(usage("--create needs --mirror-config FILE (with at least bootstrap.servers=...)"))
            }
            ("--create", Some(_)) | (_, None) => {}
            (_, Some(_)) => return Err(usage(format!("--mirror-config is only used with --create, not {action}"))),
        }

        let takes_topics = matches!(action, "--start" | "--stop" | "--pause" | "--resume");
        let topics = match (&self.topics, takes_topics) {
            (Some(t), true) => split_list("--topics", t)?,
            (None, true) => {
                return Err(usage(format!("{action} needs --topics LIST (names or patterns, e.g. 'a,orders.*')")))
            }
            (Some(t), false) if action == "--verify" => split_list("--topics", t)?,
            (Some(_), false) => {
                return Err(usage(format!(
                    "--topics is only used with --start, --stop, --pause and --resume, not {action}"
                )))
            }
            (None, false) => Vec::new(),
        };
        compile_patterns("--topics", &topics)?;

        let exclude = match (&self.exclude, action) {
            (Some(e), "--start") => split_list("--exclude", e)?,
            (Some(_), _) => return Err(usage(format!("--exclude is only used with --start, not {action}"))),
            (None, _) => Vec::new(),
        };
        compile_patterns("--exclude", &exclude)?;

        let start_position = match (&self.start_position, action) {
            (Some(p), "--start") => {
                mirrorgate::mirror::model::StartPosition::parse(p).map_err(usage)?;
                Some(p.trim().to_string())
            }
            (Some(_), _) => return Err(usage(format!("--start-position is only used with --start, not {action}"))),
            (None, _) => None,
        };
        if self.drain.is_some() && action != "--stop" {
            return Err(usage(format!("--drain is only used with --stop, not {action}")));
        }
        if let Some(secs) = self.watch {
            if action != "--describe" {
                return Err(usage(format!("--watch is only used with --describe, not {action}")));
            }
            if self.json {
                return Err(usage("--watch refreshes a table; it is not used with --json"));
            }
            if secs == 0 {
                return Err(usage("--watch needs an interval of at least 1 s"));
            }
        }
        if action != "--describe" {
            for (flag, on) in [("--json", self.json), ("--failed", self.failed)] {
                if on {
                    return Err(usage(format!("{flag} is only used with --describe, not {action}")));
                }
            }
        }

        let mirror_name = || mirror.clone().unwrap_or_default();
        let action = match action {
            "--create" => {
                Action::Create { mirror: mirror_name(), mirror_config: self.mirror_config.clone().unwrap_or_default() }
            }
            "--start" => Action::Start { mirror: mirror_name(), include: topics, exclude, start_position },
            "--stop" => Action::Topics { op: TopicOp::Stop, mirror: mirror_name(), topics, drain_secs: self.drain },
            "--pause" => Action::Topics { op: TopicOp::Pause, mirror: mirror_name(), topics, drain_secs: None },
            "--resume" => Action::Topics { op: TopicOp::Resume, mirror: mirror_name(), topics, drain_secs: None },
            "--list" => Action::List,
            "--describe" => Action::Describe {
                mirror,
                format: if self.json { DescribeFormat::Json } else { DescribeFormat::Table },
                failed_only: self.failed,
                watch_secs: self.watch,
            },
            "--verify" => Action::Verify { mirror: mirror_name(), topics },
            _ => Action::Delete { mirror: mirror_name() },
        };
        Ok(Invocation { bootstrap, command_config: self.command_config.clone(), action })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct TestCli {
        #[command(flatten)]
        args: MirrorsArgs,
    }

    fn parse(args: &str) -> Result<Invocation, String> {
        let argv = std::iter::once("mirrors").chain(args.split_whitespace());
        let cli = TestCli::try_parse_from(argv).map_err(|e| e.kind().to_string())?;
        cli.args.validate().map_err(|e| e.0)
    }

    fn ok(args: &str) -> Action {
        parse(&format!("--bootstrap-server mg:9094 {args}")).unwrap().action
    }

    fn bad(args: &str) -> String {
        parse(&format!("--bootstrap-server mg:9094 {args}")).unwrap_err()
    }

    #[test]
    fn valid_invocations() {
        assert_eq!(
            ok("--create --mirror a-to-b --mirror-config a.properties"),
            Action::Create { mirror: "a-to-b".into(), mirror_config: "a.properties".into() }
        );
        assert_eq!(
            ok("--start --mirror m --topics a,orders.*,,  --exclude x.*"),
            Action::Start {
                mirror: "m".into(),
                include: vec!["a".into(), "orders.*".into()],
                exclude: vec!["x.*".into()],
                start_position: None
            }
        );
        assert_eq!(
            ok("--stop --mirror m --topics .*"),
            Action::Topics { op: TopicOp::Stop, mirror: "m".into(), topics: vec![".*".into()], drain_secs: None }
        );
        assert_eq!(
            ok("--pause --mirror m --topics a").clone(),
            Action::Topics { op: TopicOp::Pause, mirror: "m".into(), topics: vec!["a".into()], drain_secs: None }
        );
        assert_eq!(
            ok("--resume --mirror m --topics a"),
            Action::Topics { op: TopicOp::Resume, mirror: "m".into(), topics: vec!["a".into()], drain_secs: None }
        );
        assert_eq!(ok("--list"), Action::List);
        assert_eq!(
            ok("--describe"),
            Action::Describe { mirror: None, format: DescribeFormat::Table, failed_only: false, watch_secs: None }
        );
        assert_eq!(
            ok("--describe --mirror m --json --failed"),
            Action::Describe {
                mirror: Some("m".into()),
                format: DescribeFormat::Json,
                failed_only: true,
                watch_secs: None
            }
        );
        assert_eq!(ok("--delete --mirror m"), Action::Delete { mirror: "m".into() });

        let inv = parse("--bootstrap-server a:1,b:2 --list --command-config c.properties").unwrap();
        assert_eq!(inv.bootstrap, vec!["a:1".to_string(), "b:2".to_string()]);
        assert_eq!(inv.command_config, Some("c.properties".into()));
    }

    #[test]
    fn exactly_one_action() {
        assert_eq!(
            bad("--mirror m"),
            "give exactly one action: --create, --start, --stop, --pause, --resume, --list, --describe, --delete or --verify"
        );
        assert_eq!(bad("--list --describe"), "give exactly one action, not --list and --describe");
        assert_eq!(bad("--create --delete --mirror m"), "give exactly one action, not --create and --delete");
    }

    #[test]
    fn bootstrap_server_is_required_and_checked() {
        assert_eq!(parse("--list").unwrap_err(), "one or more required arguments were not provided");
        assert_eq!(parse("--bootstrap-server mg --list").unwrap_err(), "--bootstrap-server: 'mg' is not HOST:PORT");
        assert_eq!(parse("--bootstrap-server mg:x --list").unwrap_err(), "--bootstrap-server: 'mg:x' is not HOST:PORT");
        assert_eq!(parse("--bootstrap-server , --list").unwrap_err(), "--bootstrap-server is empty");
    }

    #[test]
    fn mirror_required_except_list_and_describe() {
        for a in [
            "--create --mirror-config f",
            "--start --topics a",
            "--stop --topics a",
            "--pause --topics a",
            "--resume --topics a",
            "--delete",
        ] {
            let action = a.split_whitespace().next().unwrap();
            assert_eq!(bad(a), format!("{action} needs --mirror NAME"), "{a}");
        }
        assert_eq!(
            bad("--list --mirror m"),
            "--mirror is not used with --list (to see one mirror, use --describe --mirror NAME)"
        );
        assert_eq!(bad("--delete --mirror="), "--mirror is empty");
    }

    #[test]
    fn mirror_config_only_and_always_with_create() {
        assert_eq!(
            bad("--create --mirror m"),
            "--create needs --mirror-config FILE (with at least bootstrap.servers=...)"
        );
        assert_eq!(
            bad("--delete --mirror m --mirror-config f"),
            "--mirror-config is only used with --create, not --delete"
        );
    }

    #[test]
    fn topics_required_for_topic_actions_only() {
        for a in ["--start", "--stop", "--pause", "--resume"] {
            assert_eq!(
                bad(&format!("{a} --mirror m")),
                format!("{a} needs --topics LIST (names or patterns, e.g. 'a,orders.*')")
            );
        }
        assert_eq!(
            bad("--list --topics a"),
            "--topics is only used with --start, --stop, --pause and --resume, not --list"
        );
        assert_eq!(bad("--start --mirror m --topics ,"), "--topics has no topic names or patterns");
        assert_eq!(
            bad("--start --mirror m --topics a("),
            "--topics: 'a(' is not a valid regular expression: unclosed group"
        );
    }

    #[test]
    fn exclude_only_with_start() {
        assert_eq!(bad("--stop --mirror m --topics a --exclude b"), "--exclude is only used with --start, not --stop");
        assert_eq!(bad("--start --mirror m --topics a --exclude ,"), "--exclude has no topic names or patterns");
        assert_eq!(
            bad("--start --mirror m --topics a --exclude [x"),
            "--exclude: '[x' is not a valid regular expression: unclosed character class"
        );
    }

    #[test]
    fn json_and_failed_only_with_describe() {
        assert_eq!(bad("--list --json"), "--json is only used with --describe, not --list");
        assert_eq!(bad("--delete --mirror m --failed"), "--failed is only used with --describe, not --delete");
    }

    #[test]
    fn patterns_are_full_match() {
        let re = compile_patterns("--topics", &["orders.*".into(), "a".into()]).unwrap();
        assert!(re[0].is_match("orders.eu"));
        assert!(!re[0].is_match("x.orders"));
        assert!(re[1].is_match("a"));
        assert!(!re[1].is_match("ab"));
    }
}
