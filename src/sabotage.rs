//! Deliberately broken behaviour, to prove that the fault runner catches it (issue 34 item 9,
//! docs/reliability.md "Broken builds"). Compiled only with `--features sabotage`; without
//! the feature [`active`] is a constant `false` and every sabotage point compiles away.
//!
//! With the feature, `MIRRORGATE_SABOTAGE` (comma-separated names) turns points on:
//! - `resume-late`: each copy loop that starts at a source offset above 0 writes its first
//!   source batch as placeholders instead of copying it (resumes one batch late; offsets stay
//!   aligned, so none of mirrorgate's own guards notices);
//! - `skip-marker`: every source transaction marker the loop would write as a real marker is
//!   written as a placeholder instead;
//! - `append-twice`: each copy loop appends its first dense data batch twice;
//! - `read-uncommitted`: Fetch responses lose their `aborted_transactions`, so a
//!   read_committed consumer gets aborted records as a read_uncommitted one does.

/// Whether sabotage `name` is on (always `false` without the `sabotage` feature).
#[cfg(not(feature = "sabotage"))]
#[inline(always)]
pub fn active(_name: &str) -> bool {
    false
}

/// Whether sabotage `name` is on: listed in `MIRRORGATE_SABOTAGE` (read once).
#[cfg(feature = "sabotage")]
pub fn active(name: &str) -> bool {
    use std::sync::OnceLock;
    static ON: OnceLock<Vec<String>> = OnceLock::new();
    ON.get_or_init(|| {
        let v: Vec<String> = std::env::var("MIRRORGATE_SABOTAGE")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if !v.is_empty() {
            eprintln!("MIRRORGATE_SABOTAGE: {v:?} (a deliberately broken build)");
        }
        v
    })
    .iter()
    .any(|s| s == name)
}
