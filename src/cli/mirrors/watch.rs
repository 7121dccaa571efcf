//! `mirrorgate mirrors --describe --watch [SECONDS]`: the describe table refreshed in place
//! (like `watch`), with the copy rate per partition and totals and an estimate of the time
//! left to catch up (lag ÷ rate), until Ctrl-C.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use super::output::{one_line, table, PartitionRow};

/// Clears the terminal and moves the cursor home (ANSI: CSI H, CSI 2J).
const CLEAR: &str = "\x1b[H\x1b[2J";

/// Destination offsets per partition at the previous refresh, for the rate.
#[derive(Debug, Default)]
pub struct Rates {
    previous: HashMap<(String, String, i32), (i64, Instant)>,
}

impl Rates {
    /// Records/s copied into each partition since the previous call (`None` the first time,
    /// or when either reading is unknown), keyed like `rows`.
    pub fn update(&mut self, rows: &[PartitionRow], now: Instant) -> Vec<Option<f64>> {
        rows.iter()
            .map(|r| {
                let key = (r.mirror.clone(), r.topic.clone(), r.partition);
                let rate = match self.previous.get(&key) {
                    Some((before, at)) if r.destination_offset >= 0 && *before >= 0 => {
                        let secs = now.duration_since(*at).as_secs_f64();
                        (secs > 0.0).then(|| (r.destination_offset - before).max(0) as f64 / secs)
                    }
                    _ => None,
                };
                self.previous.insert(key, (r.destination_offset, now));
                rate
            })
            .collect()
    }
}

/// The time left to copy `lag` offsets at `rate` offsets/s, for people: `12s`, `4m10s`,
/// `2h05m`, `3d04h`; `-` when it cannot be told (no rate yet, or nothing copied while
/// behind), `0s` when caught up.
pub fn eta(lag: i64, rate: Option<f64>) -> String {
    if lag == 0 {
        return "0s".into();
    }
    let Some(rate) = rate.filter(|r| *r > 0.0 && lag > 0) else { return "-".into() };
    let secs = (lag as f64 / rate).ceil().min(99.0 * 86_400.0) as u64;
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m{:02}s", s / 60, s % 60),
        s if s < 86_400 => format!("{}h{:02}m", s / 3_600, s % 3_600 / 60),
        s => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3_600),
    }
}

/// One screen: a title line with totals (lag, rate, the time left at that rate), then
/// MIRROR, TOPIC, PARTITION, LAG, RATE/S, ETA, STATE, OWNER, ERROR per partition.
pub fn screen(rows: &[PartitionRow], rates: &[Option<f64>], every: Duration, at: &str) -> String {
    let known: Vec<i64> = rows.iter().map(|r| r.lag).filter(|l| *l >= 0).collect();
    let total_lag: i64 = known.iter().sum();
    let total_rate: f64 = rates.iter().flatten().sum();
    let failed = rows.iter().filter(|r| r.state.eq_ignore_ascii_case("FAILED")).count();
    let mut states: Vec<(String, usize)> = Vec::new();
    for r in rows {
        match states.iter_mut().find(|(s, _)| *s == r.state) {
            Some((_, n)) => *n += 1,
            None => states.push((r.state.clone(), 1)),
        }
    }
    let states: Vec<String> = states.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let mut out = format!(
        "Every {} s, {at} (Ctrl-C to stop): {} partition(s), total lag {total_lag}{}, {:.0} records/s, caught up in {}, {}{}\n\n",
        every.as_secs(),
        rows.len(),
        if known.len() < rows.len() { " (some unknown)" } else { "" },
        total_rate,
        slowest_eta(rows, rates),
        states.join(", "),
        if failed > 0 { format!(" — {failed} FAILED") } else { String::new() },
    );
    let cells: Vec<Vec<String>> = rows
        .iter()
        .zip(rates)
        .map(|(r, rate)| {
            vec![
                r.mirror.clone(),
                r.topic.clone(),
                r.partition.to_string(),
                if r.lag < 0 { "-".into() } else { r.lag.to_string() },
                rate.map_or_else(|| "-".into(), |v| format!("{v:.0}")),
                if r.lag < 0 { "-".into() } else { eta(r.lag, *rate) },
                r.state.clone(),
                r.owner.clone().unwrap_or_else(|| "-".into()),
                r.error_message.as_deref().map(one_line).filter(|m| !m.is_empty()).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    out.push_str(&table(&["MIRROR", "TOPIC", "PARTITION", "LAG", "RATE/S", "ETA", "STATE", "OWNER", "ERROR"], &cells));
    out
}

/// The time until every partition is caught up: the largest per-partition estimate
/// (partitions copy side by side), `-` while any behind partition has no rate.
fn slowest_eta(rows: &[PartitionRow], rates: &[Option<f64>]) -> String {
    let mut worst: Option<(f64, String)> = None;
    for (r, rate) in rows.iter().zip(rates) {
        if r.lag <= 0 {
            continue;
        }
        match rate.filter(|v| *v > 0.0) {
            None => return "-".into(),
            Some(v) => {
                let secs = r.lag as f64 / v;
                if worst.as_ref().is_none_or(|(w, _)| secs > *w) {
                    worst = Some((secs, eta(r.lag, Some(v))));
                }
            }
        }
    }
    worst.map_or_else(|| "0s".into(), |(_, e)| e)
}

/// Prints `screen` over the previous one.
pub fn show(screen: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = write!(stdout, "{CLEAR}{screen}");
    let _ = stdout.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(partition: i32, lag: i64, dest: i64, state: &str) -> PartitionRow {
        PartitionRow {
            mirror: "m".into(),
            topic: "t".into(),
            partition,
            source_offset: dest + lag,
            destination_offset: dest,
            lag,
            lag_high_watermark: lag,
            state: state.into(),
            retry_attempt: 0,
            error_message: None,
            source_high_watermark: dest + lag,
            offset_mode: "identical".into(),
            segments: Vec::new(),
            direct_reads: "same".into(),
            owner: Some("mg-1".into()),
        }
    }

    #[test]
    fn rates_come_from_the_destination_offsets_between_refreshes() {
        let mut rates = Rates::default();
        let t0 = Instant::now();
        assert_eq!(rates.update(&[row(0, 10, 100, "MIRRORING")], t0), vec![None]);
        let r = rates.update(&[row(0, 0, 300, "MIRRORING")], t0 + Duration::from_secs(2));
        assert_eq!(r, vec![Some(100.0)]);
    }

    #[test]
    fn the_screen_has_totals_and_one_line_per_partition() {
        let rows = [row(0, 5, 10, "MIRRORING"), row(1, 7, 20, "PAUSED")];
        let s = screen(&rows, &[Some(3.0), None], Duration::from_secs(2), "12:00:00");
        assert!(s.starts_with("Every 2 s, 12:00:00 (Ctrl-C to stop): 2 partition(s), total lag 12, 3 records/s, caught up in -, 1 MIRRORING, 1 PAUSED\n"), "{s}");
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[2].starts_with("MIRROR") && lines[2].contains("RATE/S") && lines[2].contains("ETA"), "{s}");
        assert!(lines[3].contains(" 2s "), "partition 0: lag 5 at 3/s: {s}");
        assert!(lines[3].contains("MIRRORING") && lines[3].contains("mg-1"), "{s}");
        assert_eq!(lines.len(), 5, "{s}");
    }

    #[test]
    fn the_time_left_reads_like_a_clock() {
        assert_eq!(eta(0, None), "0s");
        assert_eq!(eta(10, None), "-");
        assert_eq!(eta(10, Some(0.0)), "-");
        assert_eq!(eta(10, Some(4.0)), "3s");
        assert_eq!(eta(250, Some(1.0)), "4m10s");
        assert_eq!(eta(7_500, Some(1.0)), "2h05m");
        assert_eq!(eta(3 * 86_400 + 4 * 3_600, Some(1.0)), "3d04h");
        let rows = [row(0, 100, 0, "MIRRORING"), row(1, 30, 0, "MIRRORING"), row(2, 0, 5, "MIRRORING")];
        assert_eq!(slowest_eta(&rows, &[Some(10.0), Some(1.0), None]), "30s");
        assert_eq!(slowest_eta(&rows, &[Some(10.0), None, None]), "-");
    }
}
