//! What `mirrorgate mirrors` prints: aligned tables and JSON for `--list` / `--describe`
//! (KIP-1279 §10.1 columns and keys) and `Error: <ERROR_NAME>: <message>` lines for Kafka
//! error codes. Pure string building; never writes to a terminal itself.

use kafka_protocol::error::ResponseError;
use serde::Serialize;

use mirrorgate::wire::mirror::describe_cluster_mirrors::{ext, DescribedMirror};
use mirrorgate::wire::mirror::list_cluster_mirrors::ListedMirror;
use mirrorgate::wire::mirror::MirrorErrorCode;

/// Shown as RETRY's maximum in `--failed`: the broker default of
/// `mirror.failed.retry.max.attempts` (KIP-1279 §8.1). DescribeClusterMirrors does not carry
/// the configured value.
pub const DEFAULT_MAX_RETRY_ATTEMPTS: i32 = 20;

/// Shown in a table cell for an unknown offset or lag (-1 on the wire), as Kafka's tools do.
const NOT_AVAILABLE: &str = "-";

/// Kafka's name for an error code: the KIP-1279 names for 134–146 (e.g.
/// `UNKNOWN_CLUSTER_MIRROR`), Kafka's standard names otherwise (e.g. `INVALID_CONFIG`), and
/// `UNKNOWN_ERROR_CODE(n)` for codes neither knows.
pub fn error_name(code: i16) -> String {
    if let Some(m) = MirrorErrorCode::from_code(code) {
        return m.name().to_string();
    }
    match ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE({c})"),
        Some(e) => screaming_snake(&e.to_string()),
    }
}

/// `TopicAlreadyExists` → `TOPIC_ALREADY_EXISTS`.
fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The message to show when a response's `ErrorMessage` is null: the KIP's default messages,
/// Kafka's for the standard codes mirror RPCs reuse, else a neutral placeholder.
pub fn default_message(code: i16) -> &'static str {
    if let Some(m) = MirrorErrorCode::from_code(code) {
        return m.default_message();
    }
    match code {
        -1 => "The server experienced an unexpected error when processing the request.",
        7 => "The request timed out.",
        29 => "Topic authorization failed.",
        31 => "Cluster authorization failed.",
        35 => "The version of API is not supported.",
        36 => "Topic with this name already exists.",
        38 => "Replication factor is below 1 or larger than the number of available brokers.",
        40 => "Configuration is invalid.",
        42 => "The request is malformed or was sent to an incompatible server.",
        44 => "Request parameters do not satisfy the configured policy.",
        128 => "The regular expression is not valid.",
        _ => "(no error message from the server)",
    }
}

/// One error line: `Error: <ERROR_NAME>: [<context>: ]<message>`, where `message` is the
/// server's `ErrorMessage` or, if null or empty, [`default_message`]. Newlines in the message
/// are flattened to spaces.
pub fn format_error(code: i16, message: Option<&str>, context: Option<&str>) -> String {
    let msg = message.filter(|m| !m.trim().is_empty()).unwrap_or_else(|| default_message(code));
    let msg = one_line(msg);
    match context {
        Some(c) => format!("Error: {}: {c}: {msg}", error_name(code)),
        None => format!("Error: {}: {msg}", error_name(code)),
    }
}

pub(super) fn one_line(s: &str) -> String {
    s.split(['\r', '\n']).filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Left-aligned columns separated by two spaces, one line per row, no trailing spaces; the
/// header is always printed.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn or_dash(s: &str) -> String {
    if s.is_empty() {
        NOT_AVAILABLE.to_string()
    } else {
        s.to_string()
    }
}

fn offset_cell(v: i64) -> String {
    if v < 0 {
        NOT_AVAILABLE.to_string()
    } else {
        v.to_string()
    }
}

/// `--list`: MIRROR, TOPICS (the mirror's topic count), SOURCE-CLUSTER-ID (`-` until
/// resolved), SOURCE-BOOTSTRAP-SERVER; sorted by mirror name.
pub fn list_table(mirrors: &[ListedMirror]) -> String {
    let mut rows: Vec<Vec<String>> = mirrors
        .iter()
        .map(|m| {
            vec![
                m.mirror_name.to_string(),
                m.topic_count.to_string(),
                or_dash(&m.source_cluster_id),
                or_dash(&m.source_bootstrap),
            ]
        })
        .collect();
    rows.sort();
    table(&["MIRROR", "TOPICS", "SOURCE-CLUSTER-ID", "SOURCE-BOOTSTRAP-SERVER"], &rows)
}

/// One partition of one mirror topic, as `--describe` shows it (the Admin API's
/// `LeaderStateDescription`, KIP-1279 §10.2). Serialized with the KIP's JSON keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartitionRow {
    /// Mirror name.
    pub mirror: String,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Source last stable offset (what read_committed can copy), -1 if not available.
    pub source_offset: i64,
    /// Destination log end offset, -1 if not available.
    pub destination_offset: i64,
    /// `max(0, sourceOffset - destinationOffset)` in offsets, -1 if either is unknown.
    pub lag: i64,
    /// Lag against the source high watermark (mirrorgate extension), offsets, -1 if unknown:
    /// above `lag` while a source transaction is open (its records wait for the LSO).
    pub lag_high_watermark: i64,
    /// [`MirrorPartitionState`](mirrorgate::wire::mirror::MirrorPartitionState) name, or
    /// `UNKNOWN`.
    pub state: String,
    /// Retry count in FAILED; 0 if not failed, -1 non-retryable.
    pub retry_attempt: i16,
    /// Failure reason in FAILED, else null.
    pub error_message: Option<String>,
    /// Source high watermark (mirrorgate extension), -1 if not available.
    pub source_high_watermark: i64,
    /// `identical`, or `shifted by N since source offset X` (mirrorgate extension).
    pub offset_mode: String,
    /// The offset map `[[source_start, destination_start], ...]` (mirrorgate extension).
    pub segments: Vec<(i64, i64)>,
    /// What a reader of the destination without mirrorgate gets: `same`, `placeholders below
    /// destination offset N`, or `shifted by N` (mirrorgate extension, `ext::direct_reads`).
    pub direct_reads: String,
    /// The mirrorgate instance that copies the partition (`instances.name`; mirrorgate
    /// extension), null when not assigned.
    pub owner: Option<String>,
}

impl PartitionRow {
    fn is_failed(&self) -> bool {
        self.state.eq_ignore_ascii_case("FAILED")
    }
}

/// Lag as the Admin API computes it: `max(0, source - destination)`, -1 if either is -1.
pub fn lag(source_offset: i64, destination_offset: i64) -> i64 {
    if source_offset < 0 || destination_offset < 0 {
        -1
    } else {
        (source_offset - destination_offset).max(0)
    }
}

/// The partitions of the mirrors that answered without an error, sorted by mirror, topic and
/// partition; with `failed_only`, only FAILED ones.
pub fn partition_rows(mirrors: &[DescribedMirror], failed_only: bool) -> Vec<PartitionRow> {
    let mut rows: Vec<PartitionRow> = mirrors
        .iter()
        .filter(|m| m.error_code == 0)
        .flat_map(|m| {
            m.topics.iter().flat_map(move |t| {
                t.partitions.iter().map(move |p| {
                    let segments = ext::segments(p).unwrap_or_default();
                    // Lag in source offsets: the destination end mapped through the offset map.
                    let shift = ext::current_shift(&segments);
                    let mapped = if p.destination_offset < 0 { -1 } else { p.destination_offset + shift };
                    PartitionRow {
                        mirror: m.mirror_name.to_string(),
                        topic: t.topic_name.to_string(),
                        partition: p.partition_index,
                        source_offset: p.source_offset,
                        destination_offset: p.destination_offset,
                        lag: lag(p.source_offset, mapped),
                        lag_high_watermark: lag(ext::source_high_watermark(p).unwrap_or(-1), mapped),
                        state: p.state_value.to_string(),
                        retry_attempt: p.retry_attempt,
                        error_message: p.error_message.as_ref().map(|s| s.to_string()),
                        source_high_watermark: ext::source_high_watermark(p).unwrap_or(-1),
                        offset_mode: match ext::copy_start(p) {
                            Some(start) => {
                                format!("{}, copied from source offset {start}", ext::offset_mode(&segments))
                            }
                            None => ext::offset_mode(&segments),
                        },
                        direct_reads: ext::direct_reads(&segments, ext::placeholder_end(p)),
                        owner: ext::owner(p),
                        segments,
                    }
                })
            })
        })
        .filter(|r| !failed_only || r.is_failed())
        .collect();
    rows.sort_by(|a, b| (&a.mirror, &a.topic, a.partition).cmp(&(&b.mirror, &b.topic, b.partition)));
    rows
}

/// `--describe`: MIRROR, TOPIC, PARTITION, SOURCE-OFFSET, DESTINATION-OFFSET, LAG, STATE,
/// SOURCE-HW, LAG-HW, OFFSET-MODE, DIRECT-READS, OWNER.
pub fn describe_table(rows: &[PartitionRow]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.mirror.clone(),
                r.topic.clone(),
                r.partition.to_string(),
                offset_cell(r.source_offset),
                offset_cell(r.destination_offset),
                offset_cell(r.lag),
                r.state.clone(),
                offset_cell(r.source_high_watermark),
                offset_cell(r.lag_high_watermark),
                r.offset_mode.clone(),
                r.direct_reads.clone(),
                r.owner.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    table(
        &[
            "MIRROR",
            "TOPIC",
            "PARTITION",
            "SOURCE-OFFSET",
            "DESTINATION-OFFSET",
            "LAG",
            "STATE",
            "SOURCE-HW",
            "LAG-HW",
            "OFFSET-MODE",
            "DIRECT-READS",
            "OWNER",
        ],
        &cells,
    )
}

/// `--describe --failed`: MIRROR, TOPIC, PARTITION, RETRY (`n/max` or `NonRetryable`), ERROR.
pub fn failed_table(rows: &[PartitionRow]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let retry = if r.retry_attempt < 0 {
                "NonRetryable".to_string()
            } else {
                format!("{}/{DEFAULT_MAX_RETRY_ATTEMPTS}", r.retry_attempt)
            };
            let error = r.error_message.as_deref().map(one_line).filter(|m| !m.is_empty());
            vec![r.mirror.clone(), r.topic.clone(), r.partition.to_string(), retry, error.unwrap_or_else(|| "-".into())]
        })
        .collect();
    table(&["MIRROR", "TOPIC", "PARTITION", "RETRY", "ERROR"], &cells)
}

/// `--describe --json`: a pretty-printed JSON array of [`PartitionRow`] objects, then a newline.
pub fn describe_json(rows: &[PartitionRow]) -> String {
    // Serializing plain strings and integers cannot fail.
    let mut s = serde_json::to_string_pretty(rows).unwrap_or_else(|_| "[]".into());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;
    use mirrorgate::wire::mirror::describe_cluster_mirrors::{PartitionDetail, TopicResult};

    use super::*;

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.to_string())
    }

    fn part(index: i32, state: &str, src: i64, dst: i64) -> PartitionDetail {
        PartitionDetail {
            partition_index: index,
            state_value: s(state),
            source_offset: src,
            destination_offset: dst,
            ..Default::default()
        }
    }

    fn mirrors() -> Vec<DescribedMirror> {
        let mut failed = part(0, "FAILED", 10, 4);
        failed.retry_attempt = 3;
        failed.error_message = Some(s("Source leader\nnot available"));
        let mut fatal = part(1, "FAILED", -1, 7);
        fatal.retry_attempt = -1;
        fatal.error_message = Some(s("Source topic deleted"));
        let mut owned = part(0, "MIRRORING", 123456, 123400);
        mirrorgate::wire::mirror::describe_cluster_mirrors::ext::set_owner(&mut owned, "mg-2");
        vec![
            DescribedMirror {
                mirror_name: s("b-to-c"),
                topics: vec![TopicResult {
                    topic_name: TopicName(s("payments")),
                    partitions: vec![failed, fatal],
                    ..Default::default()
                }],
                ..Default::default()
            },
            DescribedMirror {
                mirror_name: s("a-to-b"),
                topics: vec![TopicResult {
                    topic_name: TopicName(s("orders")),
                    partitions: vec![part(1, "MIRRORING", 1500, 1500), owned],
                    ..Default::default()
                }],
                ..Default::default()
            },
            DescribedMirror {
                mirror_name: s("gone"),
                error_code: 137,
                topics: vec![TopicResult {
                    topic_name: TopicName(s("ignored")),
                    partitions: vec![part(0, "MIRRORING", 1, 1)],
                    ..Default::default()
                }],
                ..Default::default()
            },
        ]
    }

    #[test]
    fn error_names_and_lines() {
        assert_eq!(error_name(137), "UNKNOWN_CLUSTER_MIRROR");
        assert_eq!(error_name(146), "MIRROR_TOPIC_NOT_STOPPED");
        assert_eq!(error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(40), "INVALID_CONFIG");
        assert_eq!(error_name(128), "INVALID_REGULAR_EXPRESSION");
        assert_eq!(error_name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(1000), "UNKNOWN_ERROR_CODE(1000)");

        assert_eq!(
            format_error(143, None, None),
            "Error: CLUSTER_MIRROR_NOT_EMPTY: The cluster mirror still has active or non-stopped topics."
        );
        assert_eq!(
            format_error(136, Some("  "), None),
            "Error: CLUSTER_MIRROR_ALREADY_EXISTS: The cluster mirror already exists."
        );
        assert_eq!(
            format_error(139, Some("not in\nmirror m"), Some("topic orders")),
            "Error: TOPIC_NOT_IN_CLUSTER_MIRROR: topic orders: not in mirror m"
        );
        assert_eq!(format_error(40, None, None), "Error: INVALID_CONFIG: Configuration is invalid.");
        assert_eq!(format_error(999, None, None), "Error: UNKNOWN_ERROR_CODE(999): (no error message from the server)");
    }

    #[test]
    fn list_golden() {
        let listed = vec![
            ListedMirror {
                mirror_name: s("west-to-east"),
                source_bootstrap: s("west1:9092,west2:9092"),
                source_cluster_id: s(""),
                topic_count: 0,
                ..Default::default()
            },
            ListedMirror {
                mirror_name: s("a-to-b"),
                source_bootstrap: s("a:9092"),
                source_cluster_id: s("Xk3-f_9QRa2Zc0pW1vYtUg"),
                topic_count: 12,
                ..Default::default()
            },
        ];
        assert_eq!(
            list_table(&listed),
            "\
MIRROR        TOPICS  SOURCE-CLUSTER-ID       SOURCE-BOOTSTRAP-SERVER
a-to-b        12      Xk3-f_9QRa2Zc0pW1vYtUg  a:9092
west-to-east  0       -                       west1:9092,west2:9092
"
        );
        assert_eq!(list_table(&[]), "MIRROR  TOPICS  SOURCE-CLUSTER-ID  SOURCE-BOOTSTRAP-SERVER\n");
    }

    #[test]
    fn describe_golden() {
        let rows = partition_rows(&mirrors(), false);
        assert_eq!(
            describe_table(&rows),
            "\
MIRROR  TOPIC     PARTITION  SOURCE-OFFSET  DESTINATION-OFFSET  LAG  STATE      SOURCE-HW  LAG-HW  OFFSET-MODE  DIRECT-READS  OWNER
a-to-b  orders    0          123456         123400              56   MIRRORING  -          -       identical    same          mg-2
a-to-b  orders    1          1500           1500                0    MIRRORING  -          -       identical    same          -
b-to-c  payments  0          10             4                   6    FAILED     -          -       identical    same          -
b-to-c  payments  1          -              7                   -    FAILED     -          -       identical    same          -
"
        );
    }

    #[test]
    fn failed_golden() {
        let rows = partition_rows(&mirrors(), true);
        assert_eq!(
            failed_table(&rows),
            "\
MIRROR  TOPIC     PARTITION  RETRY         ERROR
b-to-c  payments  0          3/20          Source leader not available
b-to-c  payments  1          NonRetryable  Source topic deleted
"
        );
    }

    #[test]
    fn json_golden() {
        let rows = partition_rows(&mirrors(), false);
        let json = describe_json(&rows[2..]);
        assert_eq!(
            json,
            r#"[
  {
    "mirror": "b-to-c",
    "topic": "payments",
    "partition": 0,
    "sourceOffset": 10,
    "destinationOffset": 4,
    "lag": 6,
    "lagHighWatermark": -1,
    "state": "FAILED",
    "retryAttempt": 3,
    "errorMessage": "Source leader\nnot available",
    "sourceHighWatermark": -1,
    "offsetMode": "identical",
    "segments": [],
    "directReads": "same",
    "owner": null
  },
  {
    "mirror": "b-to-c",
    "topic": "payments",
    "partition": 1,
    "sourceOffset": -1,
    "destinationOffset": 7,
    "lag": -1,
    "lagHighWatermark": -1,
    "state": "FAILED",
    "retryAttempt": -1,
    "errorMessage": "Source topic deleted",
    "sourceHighWatermark": -1,
    "offsetMode": "identical",
    "segments": [],
    "directReads": "same",
    "owner": null
  }
]
"#
        );
        let mirroring = describe_json(&rows[..1]);
        assert!(mirroring.contains("\"errorMessage\": null"), "{mirroring}");
        assert_eq!(describe_json(&[]), "[]\n");
    }

    #[test]
    fn lag_rules() {
        assert_eq!(lag(10, 4), 6);
        assert_eq!(lag(4, 10), 0);
        assert_eq!(lag(-1, 10), -1);
        assert_eq!(lag(10, -1), -1);
    }
}
