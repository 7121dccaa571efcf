//! Runs one validated action of `mirrorgate mirrors` against an [`AdminConnection`] and turns
//! the responses into a [`Report`] (what to print, and whether the run failed). The
//! response-to-report functions are pure and unit-tested; only [`execute`] does I/O.

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

use mirrorgate::wire::mirror::create_cluster_mirror::ClusterMirrorConfig;
use mirrorgate::wire::mirror::describe_cluster_mirrors::DescribedMirror;
use mirrorgate::wire::mirror::{
    pause_mirror_topics, resume_mirror_topics, stop_mirror_topics, CreateClusterMirrorRequest,
    DeleteClusterMirrorRequest, DescribeClusterMirrorsRequest, DescribeClusterMirrorsResponse,
    ListClusterMirrorsRequest, ListClusterMirrorsResponse, MirrorApi, MirrorRequest, MirrorResponse,
    PauseMirrorTopicsRequest, ResumeMirrorTopicsRequest, StartMirrorTopicsRequest, StopMirrorTopicsRequest,
};

use super::args::{compile_patterns, Action, DescribeFormat, TopicOp};
use super::output::{self, format_error};
use super::props::{redact, Properties};
use super::transport::AdminConnection;

/// `TimeoutMs` sent in StartMirrorTopics, in ms.
pub const START_TIMEOUT_MS: i32 = 30_000;

/// What a run prints and whether it failed (exit status 1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Text for standard output (tables, JSON, success lines), newline-terminated.
    pub stdout: String,
    /// Lines for standard error (`Error: …`).
    pub stderr: Vec<String>,
    /// Whether any call failed.
    pub failed: bool,
}

impl Report {
    fn line(&mut self, s: impl AsRef<str>) {
        self.stdout.push_str(s.as_ref());
        self.stdout.push('\n');
    }

    fn error(&mut self, s: String) {
        self.stderr.push(s);
        self.failed = true;
    }

    fn failure(s: String) -> Self {
        let mut r = Report::default();
        r.error(s);
        r
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// The RPCs `action` sends (checked against ApiVersions before anything is sent).
pub fn needed_apis(action: &Action) -> Vec<MirrorApi> {
    match action {
        Action::Create { .. } => vec![MirrorApi::CreateClusterMirror],
        Action::Start { .. } => vec![MirrorApi::StartMirrorTopics, MirrorApi::DescribeClusterMirrors],
        Action::Topics { op, .. } => vec![
            MirrorApi::DescribeClusterMirrors,
            match op {
                TopicOp::Stop => MirrorApi::StopMirrorTopics,
                TopicOp::Pause => MirrorApi::PauseMirrorTopics,
                TopicOp::Resume => MirrorApi::ResumeMirrorTopics,
            },
        ],
        Action::List => vec![MirrorApi::ListClusterMirrors],
        Action::Describe { .. } | Action::Verify { .. } => vec![MirrorApi::DescribeClusterMirrors],
        Action::Delete { .. } => vec![MirrorApi::DeleteClusterMirror],
    }
}

/// The CreateClusterMirror request for `mirror` with the entries of `config`, in file order.
pub fn create_request(mirror: &str, config: &Properties) -> CreateClusterMirrorRequest {
    CreateClusterMirrorRequest {
        mirror_name: s(mirror),
        config: config
            .entries
            .iter()
            .map(|p| ClusterMirrorConfig { name: s(&p.key), value: Some(s(&p.value)), ..Default::default() })
            .collect(),
        ..Default::default()
    }
}

/// Runs `action`. `mirror_config` is the parsed `--mirror-config` (only for `--create`).
///
/// Errors: transport failures and unexpected response types; Kafka error codes are not
/// errors here but lines of the [`Report`].
pub async fn execute(
    conn: &mut AdminConnection,
    action: &Action,
    mirror_config: Option<&Properties>,
) -> anyhow::Result<Report> {
    match action {
        Action::Create { mirror, .. } => {
            let config = mirror_config.cloned().unwrap_or_default();
            let req = MirrorRequest::CreateClusterMirror(create_request(mirror, &config));
            match conn.call(&req).await? {
                MirrorResponse::CreateClusterMirror(r) => Ok(report_simple(
                    r.error_code,
                    r.error_message.as_deref(),
                    &config.secrets(),
                    format!("Created mirror {mirror}."),
                )),
                other => unexpected(&other),
            }
        }
        Action::Delete { mirror } => {
            let req = MirrorRequest::DeleteClusterMirror(DeleteClusterMirrorRequest {
                mirror_name: s(mirror),
                ..Default::default()
            });
            match conn.call(&req).await? {
                MirrorResponse::DeleteClusterMirror(r) => Ok(report_simple(
                    r.error_code,
                    r.error_message.as_deref(),
                    &[],
                    format!("Deleted mirror {mirror}."),
                )),
                other => unexpected(&other),
            }
        }
        Action::List => {
            let req = MirrorRequest::ListClusterMirrors(ListClusterMirrorsRequest::default());
            match conn.call(&req).await? {
                MirrorResponse::ListClusterMirrors(r) => Ok(report_list(&r)),
                other => unexpected(&other),
            }
        }
        Action::Describe { mirror, failed_only, watch_secs: Some(secs), .. } => {
            watch(conn, mirror.as_deref(), *failed_only, std::time::Duration::from_secs(*secs)).await
        }
        Action::Describe { mirror, format, failed_only, watch_secs: None } => {
            let r = describe(conn, mirror.as_deref()).await?;
            Ok(report_describe(&r, *format, *failed_only))
        }
        Action::Verify { mirror, topics } => {
            let r = describe(conn, Some(mirror)).await?;
            super::verify::run(conn, mirror, topics, &r).await
        }
        Action::Start { mirror, include, exclude, start_position } => {
            let req = MirrorRequest::StartMirrorTopics(StartMirrorTopicsRequest {
                mirror_name: s(mirror),
                include_patterns: include.iter().map(|p| s(p)).collect(),
                exclude_patterns: exclude.iter().map(|p| s(p)).collect(),
                timeout_ms: START_TIMEOUT_MS,
                start_position: start_position.as_deref().map(s),
                ..Default::default()
            });
            let r = match conn.call(&req).await? {
                MirrorResponse::StartMirrorTopics(r) => r,
                other => return unexpected(&other),
            };
            if r.error_code != 0 {
                return Ok(Report::failure(format_error(r.error_code, r.error_message.as_deref(), None)));
            }
            // The server resolves the patterns; read back which of the mirror's topics match.
            let described = describe(conn, Some(mirror)).await?;
            Ok(report_start(mirror, include, exclude, &described))
        }
        Action::Topics { op, mirror, topics, drain_secs } => {
            let described = describe(conn, Some(mirror)).await?;
            let selected = match select_topics(&described, mirror, topics) {
                Ok(t) => t,
                Err(report) => return Ok(report),
            };
            if let Some(secs) = drain_secs {
                if let Err(report) = drain(conn, mirror, &selected, std::time::Duration::from_secs(*secs)).await? {
                    return Ok(report);
                }
            }
            let names: Vec<TopicName> = selected.iter().map(|t| TopicName(s(t))).collect();
            let req = match op {
                TopicOp::Stop => MirrorRequest::StopMirrorTopics(StopMirrorTopicsRequest {
                    mirror_name: s(mirror),
                    topics: names
                        .into_iter()
                        .map(|topic_name| stop_mirror_topics::TopicMetadata { topic_name, ..Default::default() })
                        .collect(),
                    patterns: topics.iter().map(|p| s(p)).collect(),
                    ..Default::default()
                }),
                TopicOp::Pause => MirrorRequest::PauseMirrorTopics(PauseMirrorTopicsRequest {
                    mirror_name: s(mirror),
                    topics: names
                        .into_iter()
                        .map(|topic_name| pause_mirror_topics::TopicMetadata { topic_name, ..Default::default() })
                        .collect(),
                    ..Default::default()
                }),
                TopicOp::Resume => MirrorRequest::ResumeMirrorTopics(ResumeMirrorTopicsRequest {
                    mirror_name: s(mirror),
                    topics: names
                        .into_iter()
                        .map(|topic_name| resume_mirror_topics::TopicMetadata { topic_name, ..Default::default() })
                        .collect(),
                    ..Default::default()
                }),
            };
            let resp = conn.call(&req).await?;
            let outcome = match &resp {
                MirrorResponse::StopMirrorTopics(r) => TopicsOutcome {
                    error_code: r.error_code,
                    error_message: r.error_message.as_deref().map(String::from),
                    topics: r
                        .topics
                        .iter()
                        .map(|t| (t.name.to_string(), t.error_code, opt(&t.error_message)))
                        .collect(),
                },
                MirrorResponse::PauseMirrorTopics(r) => TopicsOutcome {
                    error_code: r.error_code,
                    error_message: r.error_message.as_deref().map(String::from),
                    topics: r
                        .topics
                        .iter()
                        .map(|t| (t.topic_name.to_string(), t.error_code, opt(&t.error_message)))
                        .collect(),
                },
                MirrorResponse::ResumeMirrorTopics(r) => TopicsOutcome {
                    error_code: r.error_code,
                    error_message: r.error_message.as_deref().map(String::from),
                    topics: r
                        .topics
                        .iter()
                        .map(|t| (t.name.to_string(), t.error_code, opt(&t.error_message)))
                        .collect(),
                },
                other => return unexpected(other),
            };
            Ok(report_topics(*op, mirror, &selected, &outcome))
        }
    }
}

fn opt(v: &Option<StrBytes>) -> Option<String> {
    v.as_deref().map(String::from)
}

fn unexpected(resp: &MirrorResponse) -> anyhow::Result<Report> {
    anyhow::bail!("unexpected {} response", resp.api().name())
}

/// `--stop --drain`: waits until every partition of `topics` is MIRRORING with lag 0 against
/// the source high watermark in [`DRAIN_READS`] consecutive reads spanning at least
/// [`DRAIN_SPAN`] (the data plane refreshes the source marks at least every
/// `fetch.wait.max.ms`), printing progress to stderr. `Err(report)` after `timeout`.
async fn drain(
    conn: &mut AdminConnection,
    mirror: &str,
    topics: &[String],
    timeout: std::time::Duration,
) -> anyhow::Result<Result<(), Report>> {
    let start = std::time::Instant::now();
    let mut clean_since: Option<std::time::Instant> = None;
    let mut clean_reads = 0u32;
    let mut last_print = std::time::Instant::now() - std::time::Duration::from_secs(10);
    loop {
        let r = describe(conn, Some(mirror)).await?;
        let rows: Vec<super::output::PartitionRow> = super::output::partition_rows(&r.mirrors, false)
            .into_iter()
            .filter(|p| topics.contains(&p.topic))
            .collect();
        let behind: Vec<&super::output::PartitionRow> =
            rows.iter().filter(|p| p.state != "MIRRORING" || p.lag_high_watermark != 0 || p.lag != 0).collect();
        if behind.is_empty() && !rows.is_empty() {
            clean_reads += 1;
            let since = *clean_since.get_or_insert_with(std::time::Instant::now);
            if clean_reads >= DRAIN_READS && since.elapsed() >= DRAIN_SPAN {
                eprintln!(
                    "Drained: {} partition(s) of {} topic(s) hold everything the source has.",
                    rows.len(),
                    topics.len()
                );
                return Ok(Ok(()));
            }
        } else {
            clean_reads = 0;
            clean_since = None;
            if last_print.elapsed() >= std::time::Duration::from_secs(2) {
                let lag: i64 = behind.iter().map(|p| p.lag_high_watermark.max(p.lag).max(0)).sum();
                let states: std::collections::BTreeSet<&str> = behind.iter().map(|p| p.state.as_str()).collect();
                eprintln!("Draining: {} partition(s) behind, {lag} offset(s) to copy, states {states:?}", behind.len());
                last_print = std::time::Instant::now();
            }
        }
        if start.elapsed() >= timeout {
            let names: Vec<String> = behind
                .iter()
                .map(|p| format!("{}-{} ({}, lag-hw {})", p.topic, p.partition, p.state, p.lag_high_watermark))
                .collect();
            return Ok(Err(Report::failure(format!(
                "Error: --drain gave up after {} s; nothing was stopped. Still behind: {}",
                timeout.as_secs(),
                names.join(", ")
            ))));
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Consecutive caught-up reads `--drain` needs.
const DRAIN_READS: u32 = 3;
/// The least time those reads span.
const DRAIN_SPAN: std::time::Duration = std::time::Duration::from_secs(2);

/// `--describe --watch`: the table every `every` until Ctrl-C (then an empty report: exit 0)
/// or until a describe fails (its error report).
async fn watch(
    conn: &mut AdminConnection,
    mirror: Option<&str>,
    failed_only: bool,
    every: std::time::Duration,
) -> anyhow::Result<Report> {
    let mut rates = super::watch::Rates::default();
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let r = describe(conn, mirror).await?;
        let mut errors = Report::default();
        mirror_errors(&r, &mut errors);
        if r.error_code != 0 {
            return Ok(errors);
        }
        let rows = output::partition_rows(&r.mirrors, failed_only);
        let now = std::time::Instant::now();
        let per_partition = rates.update(&rows, now);
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let at = format!("{:02}:{:02}:{:02} UTC", secs / 3600 % 24, secs / 60 % 60, secs % 60);
        let mut screen = super::watch::screen(&rows, &per_partition, every, &at);
        for e in &errors.stderr {
            screen.push_str(e);
            screen.push('\n');
        }
        super::watch::show(&screen);
        tokio::select! {
            _ = &mut interrupted => return Ok(Report::default()),
            _ = tokio::time::sleep(every) => {}
        }
    }
}

async fn describe(conn: &mut AdminConnection, mirror: Option<&str>) -> anyhow::Result<DescribeClusterMirrorsResponse> {
    let req = MirrorRequest::DescribeClusterMirrors(DescribeClusterMirrorsRequest {
        mirror_names: mirror.map(|m| vec![s(m)]),
        ..Default::default()
    });
    match conn.call(&req).await? {
        MirrorResponse::DescribeClusterMirrors(r) => Ok(r),
        other => anyhow::bail!("unexpected {} response", other.api().name()),
    }
}

/// Create / delete: one success line, or the error with any config secret redacted.
pub fn report_simple(code: i16, message: Option<&str>, secrets: &[&str], success: String) -> Report {
    if code == 0 {
        let mut r = Report::default();
        r.line(success);
        return r;
    }
    let message = message.map(|m| redact(m, secrets));
    Report::failure(format_error(code, message.as_deref(), None))
}

/// `--list`.
pub fn report_list(r: &ListClusterMirrorsResponse) -> Report {
    if r.error_code != 0 {
        return Report::failure(format_error(r.error_code, r.error_message.as_deref(), None));
    }
    Report { stdout: output::list_table(&r.mirrors), ..Default::default() }
}

fn mirror_errors(r: &DescribeClusterMirrorsResponse, report: &mut Report) {
    if r.error_code != 0 {
        report.error(format_error(r.error_code, r.error_message.as_deref(), None));
    }
    for m in r.mirrors.iter().filter(|m| m.error_code != 0) {
        report.error(format_error(
            m.error_code,
            m.error_message.as_deref(),
            Some(&format!("mirror {}", m.mirror_name)),
        ));
    }
}

/// `--describe`: the table, failed table or JSON of the mirrors that answered, and one error
/// line per failed mirror.
pub fn report_describe(r: &DescribeClusterMirrorsResponse, format: DescribeFormat, failed_only: bool) -> Report {
    let mut report = Report::default();
    mirror_errors(r, &mut report);
    if r.error_code != 0 {
        return report;
    }
    let rows = output::partition_rows(&r.mirrors, failed_only);
    report.stdout = match (format, failed_only) {
        (DescribeFormat::Json, _) => output::describe_json(&rows),
        (DescribeFormat::Table, true) => output::failed_table(&rows),
        (DescribeFormat::Table, false) => output::describe_table(&rows),
    };
    report
}

fn described_mirror<'a>(r: &'a DescribeClusterMirrorsResponse, mirror: &str) -> Result<&'a DescribedMirror, Report> {
    let mut report = Report::default();
    mirror_errors(r, &mut report);
    if report.failed {
        return Err(report);
    }
    r.mirrors.iter().find(|m| m.mirror_name.as_str() == mirror).ok_or_else(|| {
        Report::failure(format_error(
            mirrorgate::wire::mirror::MirrorErrorCode::UnknownClusterMirror.code(),
            None,
            Some(&format!("mirror {mirror}")),
        ))
    })
}

fn topic_names(m: &DescribedMirror) -> Vec<String> {
    let mut names: Vec<String> = m.topics.iter().map(|t| t.topic_name.to_string()).collect();
    names.sort();
    names.dedup();
    names
}

/// The mirror's topics that fully match any of `patterns` and none of `exclude` (sorted).
fn matching(names: &[String], patterns: &[String], exclude: &[String]) -> Vec<String> {
    // Patterns were validated with the same function in `MirrorsArgs::validate`.
    let inc = compile_patterns("--topics", patterns).unwrap_or_default();
    let exc = compile_patterns("--exclude", exclude).unwrap_or_default();
    names.iter().filter(|n| inc.iter().any(|r| r.is_match(n)) && !exc.iter().any(|r| r.is_match(n))).cloned().collect()
}

/// `--start` after a successful StartMirrorTopics: which of the mirror's topics the patterns
/// cover now, or the KIP's "No matching topics found yet" line.
pub fn report_start(
    mirror: &str,
    include: &[String],
    exclude: &[String],
    described: &DescribeClusterMirrorsResponse,
) -> Report {
    let m = match described_mirror(described, mirror) {
        Ok(m) => m,
        Err(mut report) => {
            // The start itself succeeded; only the read-back failed.
            report.stdout = format!("Started mirroring on mirror {mirror} with patterns: {}\n", include.join(", "));
            return report;
        }
    };
    let topics = matching(&topic_names(m), include, exclude);
    let mut report = Report::default();
    if topics.is_empty() {
        report.line(format!("No matching topics found yet. Patterns saved to mirror {mirror} for auto-discovery."));
    } else {
        report.line(format!("Started mirroring {} topic(s) on mirror {mirror}: {}", topics.len(), topics.join(", ")));
    }
    report
}

/// `--stop` / `--pause` / `--resume`: the mirror's current topics matching `patterns`.
///
/// Errors: a report for a describe error or when nothing matches.
pub fn select_topics(
    described: &DescribeClusterMirrorsResponse,
    mirror: &str,
    patterns: &[String],
) -> Result<Vec<String>, Report> {
    let m = described_mirror(described, mirror)?;
    let topics = matching(&topic_names(m), patterns, &[]);
    if topics.is_empty() {
        return Err(Report::failure(format!(
            "Error: no topic of mirror {mirror} matches --topics '{}'",
            patterns.join(",")
        )));
    }
    Ok(topics)
}

/// A Stop/Pause/ResumeMirrorTopics response, flattened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicsOutcome {
    /// Top-level `ErrorCode`.
    pub error_code: i16,
    /// Top-level `ErrorMessage`.
    pub error_message: Option<String>,
    /// Per topic: name, `ErrorCode`, `ErrorMessage`.
    pub topics: Vec<(String, i16, Option<String>)>,
}

/// One success line for the topics that succeeded, one error line per topic that failed.
/// Topics the server did not list are taken as succeeded when the top level has no error.
pub fn report_topics(op: TopicOp, mirror: &str, requested: &[String], outcome: &TopicsOutcome) -> Report {
    let mut report = Report::default();
    if outcome.error_code != 0 {
        report.error(format_error(outcome.error_code, outcome.error_message.as_deref(), None));
        return report;
    }
    let mut done: Vec<String> = Vec::new();
    let mut names: Vec<&str> = requested.iter().map(String::as_str).collect();
    for (name, _, _) in &outcome.topics {
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        match outcome.topics.iter().find(|(n, _, _)| n == name) {
            Some((_, code, msg)) if *code != 0 => {
                report.error(format_error(*code, msg.as_deref(), Some(&format!("topic {name}"))))
            }
            _ => done.push(name.to_string()),
        }
    }
    if !done.is_empty() {
        let n = done.len();
        let list = done.join(", ");
        report.line(match op {
            TopicOp::Stop => format!("Stopped mirroring {n} topic(s) on mirror {mirror}: {list}"),
            TopicOp::Pause => format!("Paused mirroring {n} topic(s) on mirror {mirror}: {list}"),
            TopicOp::Resume => format!("Resumed mirroring {n} topic(s) on mirror {mirror}: {list}"),
        });
    }
    report
}

#[cfg(test)]
mod tests {
    use mirrorgate::wire::mirror::describe_cluster_mirrors::{PartitionDetail, TopicResult};
    use mirrorgate::wire::mirror::list_cluster_mirrors::ListedMirror;

    use super::*;

    fn described(mirror: &str, topics: &[&str]) -> DescribeClusterMirrorsResponse {
        DescribeClusterMirrorsResponse {
            mirrors: vec![DescribedMirror {
                mirror_name: s(mirror),
                topics: topics
                    .iter()
                    .map(|t| TopicResult {
                        topic_name: TopicName(s(t)),
                        partitions: vec![PartitionDetail { state_value: s("MIRRORING"), ..Default::default() }],
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn needed_apis_per_action() {
        assert_eq!(needed_apis(&Action::List), vec![MirrorApi::ListClusterMirrors]);
        assert_eq!(
            needed_apis(&Action::Topics {
                op: TopicOp::Pause,
                mirror: "m".into(),
                topics: v(&["a"]),
                drain_secs: None
            }),
            vec![MirrorApi::DescribeClusterMirrors, MirrorApi::PauseMirrorTopics]
        );
    }

    #[test]
    fn create_sends_every_config_entry() {
        let props = Properties::parse("bootstrap.servers=src:9092\nssl.key.password=pw\n").unwrap();
        let req = create_request("a-to-b", &props);
        assert_eq!(req.mirror_name.as_str(), "a-to-b");
        let kv: Vec<(&str, Option<&str>)> = req.config.iter().map(|c| (c.name.as_str(), c.value.as_deref())).collect();
        assert_eq!(kv, vec![("bootstrap.servers", Some("src:9092")), ("ssl.key.password", Some("pw"))]);
    }

    #[test]
    fn simple_reports() {
        let ok = report_simple(0, None, &[], "Created mirror m.".into());
        assert_eq!(ok, Report { stdout: "Created mirror m.\n".into(), ..Default::default() });
        let e = report_simple(40, Some("bad ssl.key.password value 'hunter2'"), &["hunter2"], String::new());
        assert!(e.failed);
        assert_eq!(e.stdout, "");
        assert_eq!(e.stderr, vec!["Error: INVALID_CONFIG: bad ssl.key.password value '[hidden]'".to_string()]);
        let e = report_simple(143, None, &[], String::new());
        assert_eq!(
            e.stderr,
            vec!["Error: CLUSTER_MIRROR_NOT_EMPTY: The cluster mirror still has active or non-stopped topics."
                .to_string()]
        );
    }

    #[test]
    fn list_report() {
        let r = report_list(&ListClusterMirrorsResponse {
            mirrors: vec![ListedMirror {
                mirror_name: s("m"),
                source_bootstrap: s("s:1"),
                topic_count: 2,
                ..Default::default()
            }],
            ..Default::default()
        });
        assert!(!r.failed);
        assert_eq!(
            r.stdout,
            "MIRROR  TOPICS  SOURCE-CLUSTER-ID  SOURCE-BOOTSTRAP-SERVER\nm       2       -                  s:1\n"
        );
        let r = report_list(&ListClusterMirrorsResponse { error_code: 144, ..Default::default() });
        assert_eq!(
            r.stderr,
            vec!["Error: CLUSTER_MIRROR_AUTHORIZATION_FAILED: Cluster mirror authorization failed.".to_string()]
        );
    }

    #[test]
    fn describe_report_keeps_good_mirrors_and_reports_bad_ones() {
        let mut resp = described("a", &["t"]);
        resp.mirrors.push(DescribedMirror { mirror_name: s("nope"), error_code: 137, ..Default::default() });
        let r = report_describe(&resp, DescribeFormat::Table, false);
        assert!(r.failed);
        assert_eq!(
            r.stderr,
            vec!["Error: UNKNOWN_CLUSTER_MIRROR: mirror nope: The cluster mirror does not exist.".to_string()]
        );
        assert_eq!(
            r.stdout,
            "MIRROR  TOPIC  PARTITION  SOURCE-OFFSET  DESTINATION-OFFSET  LAG  STATE      SOURCE-HW  LAG-HW  OFFSET-MODE  DIRECT-READS  OWNER\na       t      0          -              -                   -    MIRRORING  -          -       identical    same          -\n"
        );
        let r = report_describe(&described("a", &["t"]), DescribeFormat::Table, true);
        assert_eq!(r.stdout, "MIRROR  TOPIC  PARTITION  RETRY  ERROR\n");
        assert!(!r.failed);
    }

    #[test]
    fn start_reports_matching_topics() {
        let d = described("m", &["orders.eu", "orders.tmp", "payments", "logs"]);
        let r = report_start("m", &v(&["orders.*", "payments"]), &v(&["orders\\.tmp"]), &d);
        assert_eq!(r.stdout, "Started mirroring 2 topic(s) on mirror m: orders.eu, payments\n");
        let r = report_start("m", &v(&["nothing.*"]), &[], &d);
        assert_eq!(r.stdout, "No matching topics found yet. Patterns saved to mirror m for auto-discovery.\n");
        let r = report_start("x", &v(&["a"]), &[], &d);
        assert!(r.failed);
        assert_eq!(r.stdout, "Started mirroring on mirror x with patterns: a\n");
        assert_eq!(
            r.stderr,
            vec!["Error: UNKNOWN_CLUSTER_MIRROR: mirror x: The cluster mirror does not exist.".to_string()]
        );
    }

    #[test]
    fn topic_selection() {
        let d = described("m", &["b", "a", "orders.eu", "xorders"]);
        assert_eq!(select_topics(&d, "m", &v(&["orders.*", "a"])).unwrap(), v(&["a", "orders.eu"]));
        let e = select_topics(&d, "m", &v(&["zz", "y.*"])).unwrap_err();
        assert_eq!(e.stderr, vec!["Error: no topic of mirror m matches --topics 'zz,y.*'".to_string()]);
        let mut gone = described("m", &[]);
        gone.mirrors[0].error_code = 137;
        gone.mirrors[0].error_message = Some(s("no mirror m"));
        let e = select_topics(&gone, "m", &v(&["a"])).unwrap_err();
        assert_eq!(e.stderr, vec!["Error: UNKNOWN_CLUSTER_MIRROR: mirror m: no mirror m".to_string()]);
    }

    #[test]
    fn topic_results_per_topic() {
        let outcome = TopicsOutcome {
            topics: vec![
                ("a".into(), 0, None),
                ("b".into(), 140, None),
                ("c".into(), 142, Some("c is being stopped".into())),
            ],
            ..Default::default()
        };
        let r = report_topics(TopicOp::Pause, "m", &v(&["a", "b", "c", "d"]), &outcome);
        assert!(r.failed);
        assert_eq!(r.stdout, "Paused mirroring 2 topic(s) on mirror m: a, d\n");
        assert_eq!(
            r.stderr,
            v(&[
                "Error: MIRROR_TOPIC_ALREADY_PAUSED: topic b: The mirror topic is already paused.",
                "Error: MIRROR_TOPIC_BEING_STOPPED: topic c: c is being stopped",
            ])
        );
        let r = report_topics(TopicOp::Stop, "m", &v(&["a"]), &TopicsOutcome::default());
        assert_eq!(r, Report { stdout: "Stopped mirroring 1 topic(s) on mirror m: a\n".into(), ..Default::default() });
        let top = TopicsOutcome { error_code: 137, ..Default::default() };
        let r = report_topics(TopicOp::Resume, "m", &v(&["a"]), &top);
        assert_eq!(r.stdout, "");
        assert_eq!(r.stderr, v(&["Error: UNKNOWN_CLUSTER_MIRROR: The cluster mirror does not exist."]));
    }
}
