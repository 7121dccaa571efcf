//! Scale-out and high availability (issue 14) with several mirrorgate processes of one
//! configuration (same destination, same `mirror_state.topic`) in front of a real Kafka 4.1.1
//! destination, mirroring from a real source cluster:
//!
//! 1. an admin RPC through one instance takes effect on another (a new mirror is listed, its
//!    topic refused for writes; `--stop` through the other makes it writable again);
//! 2. three instances share a mirror's partitions, one is killed with SIGKILL while the source
//!    is written, the survivors take its partitions and the destination ends identical;
//! 3. an owner frozen with SIGSTOP loses its partitions, and after SIGCONT it fences itself and
//!    writes nothing stale;
//! 4. SIGTERM hands the work over at once (well before the session timeout);
//! 5. scaling 1 → 3 → 1 while the source is written keeps one producer id per destination
//!    partition (the sequence = offset scheme).
//!
//! Instances use a 6 s session timeout (the broker's minimum) and a 1 s heartbeat. Tests run
//! one at a time (`SERIAL`): they measure hand-over times on a small machine.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use mirrorgate::client::cluster::{Acks, ClusterClient, ClusterError};
use mirrorgate::wire::records::{put_record, NewRecord};
use serde_json::Value;
use support::*;

const V: &str = "4.1.1";
const SESSION: Duration = Duration::from_secs(6);
const POLICY_VIOLATION: i16 = 44;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// One mirrorgate instance `name` of the group sharing `state` (6 s session, 1 s heartbeat).
fn instance(dest: &Cluster, state: &str, name: &str) -> Mirrorgate {
    let yaml = format!("instances:\n  name: {name}\n  session_timeout_ms: 6000\n  heartbeat_interval_ms: 1000\n");
    Mirrorgate::start_with(
        dest,
        MirrorgateOptions { state_topic: Some(state), extra_yaml: &yaml, ..Default::default() },
    )
}

fn create_topic(bootstrap: &str, topic: &str, partitions: u32) {
    create_topic_with(V, bootstrap, topic, partitions, &[]);
}

/// Creates a mirror of `source` through `mg` and starts `topic` on it.
fn start_mirror(mg: &Mirrorgate, source: &Cluster, topic: &str) -> String {
    let mirror = unique_name("m");
    let cfg = mirror_config_file(source, "");
    ok(
        mirrors_cli(&mg.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create",
    );
    ok(mirrors_cli(&mg.bootstrap, &["--start", "--mirror", &mirror, "--topics", topic]), "--start");
    mirror
}

/// `--describe --mirror M --json` through `mg`; an error when the CLI fails.
fn try_describe(mg: &Mirrorgate, mirror: &str) -> Result<Vec<Value>, String> {
    let out = mirrors_cli(&mg.bootstrap, &["--describe", "--mirror", mirror, "--json"]);
    if !out.status.success() {
        return Err(format!("--describe failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(Value::Array(rows)) => Ok(rows),
        other => Err(format!("--describe --json: not a list: {other:?}")),
    }
}

/// Panics with the rows when a partition is FAILED.
fn no_failed(rows: &[Value]) {
    if let Some(r) = rows.iter().find(|r| r["state"] == "FAILED") {
        panic!("mirror partition {}-{} FAILED: {}\nall rows: {rows:#?}", r["topic"], r["partition"], r["errorMessage"]);
    }
}

/// partition → owner (instance name, `None` when the row shows none).
fn owners(rows: &[Value]) -> BTreeMap<i64, Option<String>> {
    rows.iter().map(|r| (r["partition"].as_i64().unwrap(), r["owner"].as_str().map(String::from))).collect()
}

/// Polls `--describe` through `mg` until all `partitions` rows have an owner among `allowed`
/// (fails at once on a FAILED partition); returns the owner map and the time it took.
fn wait_owned_by(
    mg: &Mirrorgate,
    mirror: &str,
    partitions: usize,
    allowed: &[&str],
    timeout: Duration,
) -> (BTreeMap<i64, String>, Duration) {
    wait_owners(mg, mirror, partitions, allowed, 1, timeout)
}

/// Like [`wait_owned_by`], until the owners are also at least `spread` instances.
fn wait_owners(
    mg: &Mirrorgate,
    mirror: &str,
    partitions: usize,
    allowed: &[&str],
    spread: usize,
    timeout: Duration,
) -> (BTreeMap<i64, String>, Duration) {
    let t = Instant::now();
    let map = eventually(timeout, || owned_now(mg, mirror, partitions, allowed, spread));
    (map, t.elapsed())
}

/// The owner map through `mg` when every one of the `partitions` rows has an owner among
/// `allowed` and the owners are at least `spread` instances.
fn owned_now(
    mg: &Mirrorgate,
    mirror: &str,
    partitions: usize,
    allowed: &[&str],
    spread: usize,
) -> Result<BTreeMap<i64, String>, String> {
    let rows = try_describe(mg, mirror)?;
    no_failed(&rows);
    let o = owners(&rows);
    if o.len() == partitions && o.values().all(|w| w.as_deref().is_some_and(|w| allowed.contains(&w))) {
        let map: BTreeMap<i64, String> = o.into_iter().map(|(p, w)| (p, w.unwrap())).collect();
        if owner_set(&map).len() >= spread {
            return Ok(map);
        }
        return Err(format!("owners {map:?} are fewer than {spread} instances"));
    }
    Err(format!("owners {o:?}, want all of {partitions} among {allowed:?}"))
}

/// The instances owning partitions in `map`.
fn owner_set(map: &BTreeMap<i64, String>) -> BTreeSet<String> {
    map.values().cloned().collect()
}

/// The last `joined generation G as ROLE with K partitions` of an instance's log: (G, K).
fn last_generation(mg: &Mirrorgate) -> Option<(i64, i64)> {
    let log = mg.log();
    let line = log.lines().rev().find(|l| l.contains("joined generation "))?;
    let rest = line.split("joined generation ").nth(1)?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    // G as ROLE with K partitions ...
    let g = words.first()?.parse().ok()?;
    let k = words.get(4)?.parse().ok()?;
    Some((g, k))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// A plain (non-idempotent) record batch of one record `key`/`value`.
fn one_record_batch(key: &str, value: &str) -> Bytes {
    let ts = now_ms();
    let mut out = BytesMut::new();
    out.put_i64(0); // baseOffset
    out.put_i32(0); // batchLength, below
    out.put_i32(-1); // partitionLeaderEpoch
    out.put_i8(2); // magic
    out.put_u32(0); // crc, below
    out.put_i16(0); // attributes
    out.put_i32(0); // lastOffsetDelta
    out.put_i64(ts);
    out.put_i64(ts);
    out.put_i64(-1); // producerId
    out.put_i16(-1); // producerEpoch
    out.put_i32(-1); // baseSequence
    out.put_i32(1); // records
    put_record(
        &mut out,
        &NewRecord { key: Some(key.as_bytes()), value: Some(value.as_bytes()), ..NewRecord::default() },
    );
    let len = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

fn signal(mg: &Mirrorgate, sig: &str) {
    let status = Command::new("kill").args([sig, &mg.pid().to_string()]).status().expect("kill");
    assert!(status.success(), "kill {sig} {}", mg.pid());
}

/// Writes `ROUND`-record rounds (`w<round>-<i>`, keys spread over the partitions) to the
/// source with an idempotent librdkafka producer until stopped.
struct Writer {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<usize>,
}

const ROUND: usize = 200;

impl Writer {
    fn start(bootstrap: &str, topic: &str, tag: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, bootstrap, topic, tag) = (stop.clone(), bootstrap.to_string(), topic.to_string(), tag.to_string());
        let handle = std::thread::spawn(move || {
            let mut rounds = 0usize;
            while !s.load(Ordering::Relaxed) {
                let out = python_client(&[
                    "produce",
                    "--bootstrap",
                    &bootstrap,
                    "--topic",
                    &topic,
                    "--count",
                    &ROUND.to_string(),
                    "--prefix",
                    &format!("{tag}{rounds}"),
                    "--idempotent",
                    "--timeout",
                    "60",
                ]);
                ok(out, &format!("continuous produce round {rounds}"));
                rounds += 1;
                std::thread::sleep(Duration::from_millis(150));
            }
            rounds
        });
        Self { stop, handle }
    }

    /// Stops after the round in progress; returns the records written.
    fn finish(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("writer thread") * ROUND
    }
}

fn produce(bootstrap: &str, topic: &str, count: usize, prefix: &str) {
    ok(
        python_client(&[
            "produce",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--count",
            &count.to_string(),
            "--prefix",
            prefix,
            "--idempotent",
            "--timeout",
            "60",
        ]),
        "produce",
    );
}

/// Log end offsets of every partition of `topic` on a cluster.
fn end_offsets(c: &ClusterClient, topic: &str, partitions: i32) -> Result<Vec<i64>, String> {
    (0..partitions).map(|p| block(c.list_offsets(topic, p, -1)).map_err(|e| e.to_string())).collect()
}

/// Waits until, through `mg`, every partition is MIRRORING with lag 0 and the destination's
/// log ends equal the source's; returns the end offsets.
fn wait_caught_up(
    mg: &Mirrorgate,
    mirror: &str,
    src: &ClusterClient,
    dst: &ClusterClient,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Vec<i64> {
    eventually(timeout, || {
        let rows = try_describe(mg, mirror)?;
        no_failed(&rows);
        if rows.len() != partitions as usize
            || !rows.iter().all(|r| r["state"] == "MIRRORING" && r["lag"].as_i64() == Some(0))
        {
            return Err(format!("not caught up: {rows:#?}"));
        }
        let (s, d) = (end_offsets(src, topic, partitions)?, end_offsets(dst, topic, partitions)?);
        if s == d {
            Ok(s)
        } else {
            Err(format!("source ends {s:?}, destination ends {d:?}"))
        }
    })
}

/// `--verify` through `mg` reports every partition identical.
fn verify_identical(mg: &Mirrorgate, mirror: &str, partitions: i32) {
    let out = ok(mirrors_cli(&mg.bootstrap, &["--verify", "--mirror", mirror]), "--verify");
    assert!(
        out.contains(&format!("Verified {partitions} partition(s)"))
            && out.contains(&format!("{partitions} identical, 0 different")),
        "{out}"
    );
}

/// The records through `mg` are the source's (partition, offset, key, value, headers,
/// timestamp), `total` of them, each value once.
fn same_records(source: &Cluster, mg: &Mirrorgate, topic: &str, total: usize) {
    let on_source = consume_all(&source.bootstrap, topic, total, "read_committed");
    let via = consume_all(&mg.bootstrap, topic, total, "read_committed");
    assert_eq!(on_source.len(), total, "records on the source");
    assert_eq!(via.len(), total, "records through mirrorgate");
    let values: HashSet<&str> = via.iter().map(|r| r["value"].as_str().unwrap_or("")).collect();
    assert_eq!(values.len(), total, "duplicate values on the destination");
    if via != on_source {
        let first = via.iter().zip(&on_source).find(|(a, b)| a != b);
        panic!("records through mirrorgate differ from the source; first difference: {first:?}");
    }
}

// ---------------------------------------------------------------------------------------
// 1. Admin through A, visible through B
// ---------------------------------------------------------------------------------------

/// A mirror created and started through A is listed by B, B refuses writes to its topic,
/// and `--stop` through B makes the topic STOPPED and writable through A at the next offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_through_one_instance_takes_effect_on_the_other() {
    let _serial = serial();
    let (source, dest) = (cluster("source"), cluster("dest"));
    let state = unique_name("__mirror_state-ha");
    let a = instance(&dest, &state, "a");
    let b = instance(&dest, &state, "b");
    let topic = unique_name("admin");
    create_topic(&source.bootstrap, &topic, 1);
    produce_to_partition_0(&source.bootstrap, &topic, 20, "before");

    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&a.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create through A",
    );
    let created = Instant::now();
    eventually(Duration::from_secs(10), || {
        let out = ok(mirrors_cli(&b.bootstrap, &["--list"]), "--list through B");
        out.lines().any(|l| l.split_whitespace().next() == Some(mirror.as_str())).then_some(()).ok_or(out)
    });
    let listed = created.elapsed();

    ok(mirrors_cli(&a.bootstrap, &["--start", "--mirror", &mirror, "--topics", &topic]), "--start through A");
    let started = Instant::now();
    eventually(Duration::from_secs(10), || {
        let rows = try_describe(&b, &mirror)?;
        (rows.len() == 1 && rows[0]["topic"] == topic.as_str()).then_some(()).ok_or(format!("{rows:?}"))
    });
    let described = started.elapsed();

    // A write through B: refused (POLICY_VIOLATION, naming the mirror) — never appended.
    let via_b = plaintext_client(&b.bootstrap);
    let refused = loop {
        match block(via_b.produce(&topic, 0, one_record_batch("k", "through-b"), Acks::All)) {
            Ok(offset) => panic!("B appended a write to mirror topic {topic} at offset {offset}"),
            Err(ClusterError::Kafka { error, message, .. }) if error.0 == POLICY_VIOLATION => {
                break (started.elapsed(), message)
            }
            Err(e) => {
                assert!(started.elapsed() < Duration::from_secs(10), "no refusal through B: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    eprintln!(
        "propagation: --create through A listed by B after {listed:?}; --start through A described by B after {described:?}; \
         write through B refused {:?} after A's answer ({:?})",
        refused.0, refused.1
    );
    assert!(listed < Duration::from_secs(5), "B listed the mirror after {listed:?}");
    assert!(refused.0 < Duration::from_secs(5), "B refused writes after {:?}", refused.0);

    // Everything copied, then failover through B.
    let (src, dst) = (plaintext_client(&source.bootstrap), plaintext_client(&dest.bootstrap));
    assert_eq!(wait_caught_up(&a, &mirror, &src, &dst, &topic, 1, Duration::from_secs(60)), vec![20]);
    let rows = try_describe(&b, &mirror).unwrap();
    assert!(rows[0]["owner"] == "a" || rows[0]["owner"] == "b", "owner: {rows:?}");
    ok(mirrors_cli(&b.bootstrap, &["--stop", "--mirror", &mirror, "--topics", &topic]), "--stop through B");
    let stopping = Instant::now();
    eventually(Duration::from_secs(30), || {
        let rows = try_describe(&a, &mirror)?;
        (rows.len() == 1 && rows[0]["state"] == "STOPPED").then_some(()).ok_or(format!("{rows:?}"))
    });
    eprintln!("--stop through B: STOPPED through A after {:?}", stopping.elapsed());
    // Writable through A, at the source's next offset.
    let via_a = plaintext_client(&a.bootstrap);
    let offset = eventually(Duration::from_secs(10), || {
        block(via_a.produce(&topic, 0, one_record_batch("k", "after-stop"), Acks::All)).map_err(|e| e.to_string())
    });
    assert_eq!(offset, 20, "the first write after --stop lands at the source's log end");
    assert_eq!(block(dst.list_offsets(&topic, 0, -1)).unwrap(), 21);
}

/// Two admin requests at once, through A and through B, about the same mirror (each sets
/// a different mirror config): both changes are kept, seen through both instances, in every
/// round. (Each instance writes the whole mirror record; the one whose write lands later
/// merges the other's change when it follows it back.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// (The guard only keeps this binary's tests from running side by side; each has its own
// runtime, so holding it across awaits blocks nothing else.)
#[allow(clippy::await_holding_lock)]
async fn concurrent_admin_changes_through_two_instances_are_both_kept() {
    let _serial = serial();
    let (source, dest) = (cluster("source"), cluster("dest"));
    let state = unique_name("__mirror_state-ha");
    let a = instance(&dest, &state, "a");
    let b = instance(&dest, &state, "b");
    let mirror = unique_name("m");
    let cfg = mirror_config_file(&source, "");
    ok(
        mirrors_cli(&a.bootstrap, &["--create", "--mirror", &mirror, "--mirror-config", cfg.to_str().unwrap()]),
        "--create through A",
    );
    eventually(Duration::from_secs(10), || {
        let out = ok(mirrors_cli(&b.bootstrap, &["--list"]), "--list through B");
        out.lines().any(|l| l.split_whitespace().next() == Some(mirror.as_str())).then_some(()).ok_or(out)
    });
    let (ka, kb) = ("mirror.failed.retry.max.attempts", "mirror.failed.retry.initial.backoff.ms");
    let mut merged_rounds = 0;
    for round in 1..=6 {
        let (va, vb) = (format!("{}", 10 + round), format!("{}", 1000 + round));
        let (ra, rb) =
            tokio::join!(alter_mirror_config(&a, &mirror, ka, &va), alter_mirror_config(&b, &mirror, kb, &vb));
        assert_eq!((ra.0, rb.0), (0, 0), "round {round}: {ra:?} {rb:?}");
        let started = Instant::now();
        loop {
            let (ca, cb) = (describe_mirror_configs(&a, &mirror).await, describe_mirror_configs(&b, &mirror).await);
            let want = (Some(Some(va.clone())), Some(Some(vb.clone())));
            let got_a = (ca.get(ka).cloned(), ca.get(kb).cloned());
            let got_b = (cb.get(ka).cloned(), cb.get(kb).cloned());
            if got_a == want && got_b == want {
                if started.elapsed() > Duration::from_millis(50) {
                    merged_rounds += 1;
                }
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "round {round}: a change was lost: through A {got_a:?}, through B {got_b:?}, want {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    eprintln!(
        "concurrent admin changes: 6 rounds kept both changes ({merged_rounds} needed more than 50 ms to converge)"
    );
}

// ---------------------------------------------------------------------------------------
// 2. Three instances share a mirror; one is killed with SIGKILL
// ---------------------------------------------------------------------------------------

/// Six partitions over A, B, C: every partition has one owner (the same through every
/// instance, the owners' counts of the last generation add up to 6), spread over at least
/// two instances. The owner of partition 0 is killed (SIGKILL) while the source is written;
/// the survivors own everything within the session timeout + 10 s, the lag returns to 0,
/// `--verify` passes and the destination holds the source's records, no more, no fewer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_share_partitions_and_survive_a_kill_9() {
    let _serial = serial();
    let t0 = Instant::now();
    let (source, dest) = (cluster("source"), cluster("dest"));
    let state = unique_name("__mirror_state-ha");
    let mut mgs: BTreeMap<String, Mirrorgate> =
        ["a", "b", "c"].iter().map(|n| (n.to_string(), instance(&dest, &state, n))).collect();
    let topic = unique_name("kill9");
    create_topic(&source.bootstrap, &topic, 6);
    produce(&source.bootstrap, &topic, 600, "first");
    let (src, dst) = (plaintext_client(&source.bootstrap), plaintext_client(&dest.bootstrap));
    let ends = end_offsets(&src, &topic, 6).unwrap();
    assert!(ends.iter().all(|e| *e > 0), "records in every partition: {ends:?}");
    let mirror = start_mirror(&mgs["a"], &source, &topic);

    let (_, t) = wait_owned_by(&mgs["a"], &mirror, 6, &["a", "b", "c"], Duration::from_secs(30));
    // Settled: every instance in the same generation, whose partition counts add up to 6
    // and match the owners described, and every instance describes the same owners.
    let (owned, gens) = eventually(Duration::from_secs(30), || {
        let gens: BTreeMap<&String, Option<(i64, i64)>> = mgs.iter().map(|(n, m)| (n, last_generation(m))).collect();
        let g: BTreeSet<i64> = gens.values().flatten().map(|x| x.0).collect();
        let sum: i64 = gens.values().flatten().map(|x| x.1).sum();
        if g.len() != 1 || sum != 6 || gens.values().any(Option::is_none) {
            return Err(format!("generations {gens:?}"));
        }
        let o = owned_now(&mgs["a"], &mirror, 6, &["a", "b", "c"], 1)?;
        for (n, m) in &mgs {
            let theirs = owned_now(m, &mirror, 6, &["a", "b", "c"], 1)?;
            if theirs != o {
                return Err(format!("{n} describes owners {theirs:?}, a describes {o:?}"));
            }
        }
        for (n, g) in &gens {
            let k = g.unwrap().1;
            let described = o.values().filter(|w| w == n).count() as i64;
            if described != k {
                return Err(format!("{n} logged {k} partitions, describe shows {described}: {o:?}"));
            }
        }
        Ok((o, gens))
    });
    eprintln!("first owners after {t:?}: {owned:?} (generations {gens:?})");
    assert!(owner_set(&owned).len() >= 2, "owners spread over at least two instances: {owned:?}");

    let writer = Writer::start(&source.bootstrap, &topic, "w");
    std::thread::sleep(Duration::from_secs(2));
    let victim = owned[&0].clone();
    let victim_parts: Vec<i64> = owned.iter().filter(|(_, w)| **w == victim).map(|(p, _)| *p).collect();
    let survivors: Vec<&str> = ["a", "b", "c"].into_iter().filter(|n| *n != victim).collect();
    signal(&mgs[&victim], "-KILL");
    let (after, takeover) =
        wait_owned_by(&mgs[survivors[0]], &mirror, 6, &survivors, SESSION + Duration::from_secs(10));
    eprintln!(
        "kill -9 of {victim} (owner of {victim_parts:?}): survivors own everything after {takeover:?}: {after:?}"
    );
    assert!(takeover < SESSION + Duration::from_secs(10), "takeover after {takeover:?}");
    // The other survivor describes the same owners.
    eventually(Duration::from_secs(5), || {
        let theirs = owned_now(&mgs[survivors[1]], &mirror, 6, &survivors, 1)?;
        let ours = owned_now(&mgs[survivors[0]], &mirror, 6, &survivors, 1)?;
        (theirs == ours).then_some(()).ok_or(format!("{theirs:?} vs {ours:?}"))
    });
    std::thread::sleep(Duration::from_secs(3));
    let written = writer.finish();
    let total = 600 + written;
    let survivor = &mgs[survivors[0]];
    let ends = wait_caught_up(survivor, &mirror, &src, &dst, &topic, 6, Duration::from_secs(90));
    assert_eq!(ends.iter().sum::<i64>(), total as i64, "source end offsets {ends:?} vs {total} records");
    verify_identical(survivor, &mirror, 6);
    same_records(&source, survivor, &topic, total);
    mgs.remove(&victim);
    eprintln!("kill -9: {total} records ({written} while killing), {:?}", t0.elapsed());
}

// ---------------------------------------------------------------------------------------
// 3. SIGSTOP of an owner
// ---------------------------------------------------------------------------------------

/// An owner frozen (SIGSTOP) while the source is written: the other instance takes its
/// partitions; after SIGCONT the frozen one fences itself (or learns its work is gone) and
/// writes nothing stale: `--verify` passes, nothing FAILED, destination ends = source ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_owner_loses_its_partitions_and_writes_nothing_stale() {
    let _serial = serial();
    let t0 = Instant::now();
    let (source, dest) = (cluster("source"), cluster("dest"));
    let state = unique_name("__mirror_state-ha");
    let a = instance(&dest, &state, "a");
    let b = instance(&dest, &state, "b");
    let topic = unique_name("sigstop");
    create_topic(&source.bootstrap, &topic, 4);
    produce(&source.bootstrap, &topic, 400, "first");
    let (src, dst) = (plaintext_client(&source.bootstrap), plaintext_client(&dest.bootstrap));
    let mirror = start_mirror(&a, &source, &topic);
    wait_owners(&a, &mirror, 4, &["a", "b"], 2, Duration::from_secs(30));
    wait_caught_up(&a, &mirror, &src, &dst, &topic, 4, Duration::from_secs(60));
    let writer = Writer::start(&source.bootstrap, &topic, "w");
    std::thread::sleep(Duration::from_secs(2));
    // Freeze b (a answers the test's admin requests) while it copies.
    let (owned, _) = wait_owners(&a, &mirror, 4, &["a", "b"], 2, Duration::from_secs(30));
    let b_parts: Vec<i32> = owned.iter().filter(|(_, w)| *w == "b").map(|(p, _)| *p as i32).collect();
    signal(&b, "-STOP");
    let at_stop: Vec<i64> = b_parts.iter().map(|p| block(dst.list_offsets(&topic, *p, -1)).unwrap()).collect();
    let (_, takeover) = wait_owned_by(&a, &mirror, 4, &["a"], SESSION + Duration::from_secs(10));
    eprintln!("SIGSTOP of b (owner of {b_parts:?}): a owns everything after {takeover:?}");
    // a copies b's partitions while b is frozen.
    eventually(Duration::from_secs(30), || {
        let now: Vec<i64> = b_parts
            .iter()
            .map(|p| block(dst.list_offsets(&topic, *p, -1)).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        now.iter().zip(&at_stop).all(|(n, s)| n > s).then_some(()).ok_or(format!("{now:?} vs {at_stop:?} at SIGSTOP"))
    });
    let before_cont = b.log().len();
    signal(&b, "-CONT");
    let resumed = Instant::now();
    // Frozen past its fence deadline (session timeout − heartbeat interval), b fences itself
    // first thing after SIGCONT: its heartbeat loop checks the deadline before any answer.
    eventually(Duration::from_secs(15), || {
        let log = b.log();
        log[before_cont..].contains("self-fenced: no successful heartbeat").then_some(()).ok_or_else(|| tail(&log, 20))
    });
    eprintln!("b fenced itself within {:?} of SIGCONT", resumed.elapsed());
    std::thread::sleep(Duration::from_secs(10).saturating_sub(resumed.elapsed()));
    let written = writer.finish();
    let total = 400 + written;
    let ends = wait_caught_up(&a, &mirror, &src, &dst, &topic, 4, Duration::from_secs(90));
    assert_eq!(ends.iter().sum::<i64>(), total as i64, "source ends {ends:?}");
    verify_identical(&a, &mirror, 4);
    same_records(&source, &a, &topic, total);
    // b is back in the group and owns work again: the owners (as a describes them) are a and
    // b, and b started copying a partition of the topic after SIGCONT.
    let (o, _) = wait_owners(&a, &mirror, 4, &["a", "b"], 2, Duration::from_secs(60));
    eventually(Duration::from_secs(30), || {
        let log = b.log();
        let started =
            log[before_cont..].lines().any(|l| l.contains("mirroring partition") && l.contains(topic.as_str()));
        started
            .then_some(())
            .ok_or_else(|| format!("b owns {o:?} but started no copy loop after SIGCONT:\n{}", tail(&log, 30)))
    });
    eprintln!("SIGSTOP: {total} records, owners at the end {o:?}, {:?}", t0.elapsed());
}

/// Issue 33 item 4: an owner frozen (SIGSTOP, staged by the failpoint `marker-add:1:stop`)
/// right before the AddPartitionsToTxn of a lone COMMIT marker; the other instance takes the
/// partition over and copies the marker and the rest; SIGCONT. The frozen instance sends
/// nothing stale: its request is not sent without the lease, and the new owner fenced the
/// marker's transactional id (InitProducerId) before using it. The marker id has no
/// transaction open behind the new owner's back, and with more data and another marker the
/// partition stays MIRRORING and identical. (Old code: the old owner's AddPartitionsToTxn at
/// the epoch the new owner had resumed reopened the transaction, which the coordinator would
/// have aborted on its timeout with an ABORT marker in the middle of the log.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_frozen_before_a_marker_cannot_reopen_its_transaction() {
    let _serial = serial();
    let (source, dest) = (cluster("source"), cluster("dest"));
    let state = unique_name("__mirror_state-fence");
    let fp = "marker-add:1:stop";
    let yaml = "instances:\n  name: b\n  session_timeout_ms: 6000\n  heartbeat_interval_ms: 1000\n";
    let b = Mirrorgate::start_with(
        &dest,
        MirrorgateOptions {
            state_topic: Some(&state),
            extra_yaml: yaml,
            env: &[("MIRRORGATE_FAILPOINT", fp)],
            ..Default::default()
        },
    );
    let topic = unique_name("fence");
    create_topic(&source.bootstrap, &topic, 1);
    produce(&source.bootstrap, &topic, 5, "first");
    txn_producer(V, &source.bootstrap, &topic, &["--commit", "c1,c2"]);
    let (src, dst) = (plaintext_client(&source.bootstrap), plaintext_client(&dest.bootstrap));
    let mirror = start_mirror(&b, &source, &topic);
    let marker_id = format!("mirrorgate.{}.{mirror}.{topic}.0.m", mirror.len());
    // b stops itself at the COMMIT marker (offset 7), before its AddPartitionsToTxn.
    eventually(Duration::from_secs(60), || {
        let log = b.log();
        log.contains(&format!("MIRRORGATE_FAILPOINT {fp} reached")).then_some(()).ok_or_else(|| tail(&log, 10))
    });
    assert_eq!(block(dst.list_offsets(&topic, 0, -1)).unwrap(), 7, "the records before the marker copied");
    let a = instance(&dest, &state, "a");
    let (_, takeover) = wait_owned_by(&a, &mirror, 1, &["a"], SESSION + Duration::from_secs(30));
    let ends = wait_caught_up(&a, &mirror, &src, &dst, &topic, 1, Duration::from_secs(60));
    eprintln!("a took the partition over after {takeover:?} and copied to {ends:?}");
    let before_cont = b.log().len();
    signal(&b, "-CONT");
    eventually(Duration::from_secs(15), || {
        let log = b.log();
        log[before_cont..].contains("self-fenced: no successful heartbeat").then_some(()).ok_or_else(|| tail(&log, 20))
    });
    std::thread::sleep(Duration::from_secs(3));
    let out = kafka_tool(
        V,
        "transactions",
        &["--bootstrap-server", &dest.bootstrap, "describe", "--transactional-id", &marker_id],
        None,
    );
    let described = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(described.contains(&marker_id), "{out:?}");
    assert!(
        !described.contains("Ongoing"),
        "the frozen owner reopened the marker transaction behind the new owner: {described}\n{}",
        tail(&b.log()[before_cont..], 30)
    );
    // More data and another marker: copied by whoever owns the partition now, identical.
    produce(&source.bootstrap, &topic, 5, "second");
    txn_producer(V, &source.bootstrap, &topic, &["--commit", "c3"]);
    let ends = wait_caught_up(&a, &mirror, &src, &dst, &topic, 1, Duration::from_secs(60));
    assert_eq!(ends, vec![15], "5 + 3 + 5 + 2 source offsets");
    verify_identical(&a, &mirror, 1);
}

// ---------------------------------------------------------------------------------------
// 4. SIGTERM moves the work at once
// ---------------------------------------------------------------------------------------

/// Two instances mirroring; SIGTERM to one: it exits 0 within the data-plane stop timeout,
/// having stopped its copy loops and left the group, and the other owns everything well
/// before the session timeout; the mirror carries on identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_the_work_over_at_once() {
    let _serial = serial();
    let (source, dest) = (cluster("source"), cluster("dest"));
    let state = unique_name("__mirror_state-ha");
    let a = instance(&dest, &state, "a");
    let mut b = instance(&dest, &state, "b");
    let topic = unique_name("sigterm");
    create_topic(&source.bootstrap, &topic, 4);
    produce(&source.bootstrap, &topic, 400, "first");
    let (src, dst) = (plaintext_client(&source.bootstrap), plaintext_client(&dest.bootstrap));
    let mirror = start_mirror(&a, &source, &topic);
    wait_owners(&a, &mirror, 4, &["a", "b"], 2, Duration::from_secs(30));
    let writer = Writer::start(&source.bootstrap, &topic, "w");
    std::thread::sleep(Duration::from_secs(2));

    let t0 = Instant::now();
    let (status, exited, takeover) = std::thread::scope(|s| {
        let poll = s.spawn(|| {
            let deadline = t0 + Duration::from_secs(30);
            while Instant::now() < deadline {
                if let Ok(rows) = try_describe(&a, &mirror) {
                    let o = owners(&rows);
                    if o.len() == 4 && o.values().all(|w| w.as_deref() == Some("a")) {
                        return Some(t0.elapsed());
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            None
        });
        let status = b.terminate(proxy_stop_timeout());
        let exited = t0.elapsed();
        (status, exited, poll.join().unwrap())
    });
    eprintln!("SIGTERM of b: exited {status} after {exited:?}; a owns everything after {takeover:?}");
    assert!(status.success(), "exit status {status}; log:\n{}", tail(&b.log(), 30));
    let log = b.log();
    assert!(log.contains("copy loops stopped") && log.contains("left the mirrorgate group"), "{}", tail(&log, 30));
    let takeover = takeover.expect("a did not own every partition within 30 s of the SIGTERM");
    assert!(takeover < SESSION, "takeover after {takeover:?} (session timeout {SESSION:?})");

    let written = writer.finish();
    let total = 400 + written;
    let ends = wait_caught_up(&a, &mirror, &src, &dst, &topic, 4, Duration::from_secs(90));
    assert_eq!(ends.iter().sum::<i64>(), total as i64);
    verify_identical(&a, &mirror, 4);
    same_records(&source, &a, &topic, total);
}

/// mirrorgate's data-plane stop timeout (src/proxy/mod.rs `DATA_PLANE_STOP_TIMEOUT`).
fn proxy_stop_timeout() -> Duration {
    mirrorgate::proxy::DATA_PLANE_STOP_TIMEOUT
}

// ---------------------------------------------------------------------------------------
// 5. Scale 1 → 3 → 1 while copying
// ---------------------------------------------------------------------------------------

/// One instance copying a topic written continuously; two more join (the work spreads over
/// all three, and the newcomers copy their partitions), then both get SIGTERM (the first takes everything back). The destination is
/// the source's, and each destination partition was written by exactly one producer id whose
/// last sequence is the partition's last offset (sequence = offset, one producer id per
/// partition, whichever instance wrote).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_one_three_one_while_copying_keeps_one_producer_per_partition() {
    let _serial = serial();
    let t0 = Instant::now();
    let (source, dest) = (cluster("source"), cluster("dest"));
    let state = unique_name("__mirror_state-ha");
    let a = instance(&dest, &state, "a");
    let topic = unique_name("scale");
    create_topic(&source.bootstrap, &topic, 4);
    produce(&source.bootstrap, &topic, 400, "first");
    let (src, dst) = (plaintext_client(&source.bootstrap), plaintext_client(&dest.bootstrap));
    let mirror = start_mirror(&a, &source, &topic);
    let writer = Writer::start(&source.bootstrap, &topic, "w");
    wait_owned_by(&a, &mirror, 4, &["a"], Duration::from_secs(30));
    eventually(Duration::from_secs(60), || {
        let d = end_offsets(&dst, &topic, 4)?;
        d.iter().all(|e| *e > 0).then_some(()).ok_or(format!("{d:?}"))
    });

    let mut b = instance(&dest, &state, "b");
    let mut c = instance(&dest, &state, "c");
    let (o, spread) = wait_owners(&a, &mirror, 4, &["a", "b", "c"], 3, Duration::from_secs(30));
    eprintln!("scale 1 → 3: owners {o:?}, spread over three {spread:?} after c was ready");
    // b and c copy their partitions (a owns none of them now): the destination grows there.
    let theirs: Vec<i32> = o.iter().filter(|(_, w)| *w != "a").map(|(p, _)| *p as i32).collect();
    let before = (theirs.iter().map(|p| block(dst.list_offsets(&topic, *p, -1)).unwrap())).collect::<Vec<_>>();
    eventually(Duration::from_secs(30), || {
        let now: Vec<i64> = theirs
            .iter()
            .map(|p| block(dst.list_offsets(&topic, *p, -1)).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        now.iter().zip(&before).all(|(n, b)| n > b).then_some(()).ok_or(format!("{theirs:?}: {now:?} vs {before:?}"))
    });
    assert_eq!(owned_now(&a, &mirror, 4, &["a", "b", "c"], 3).unwrap(), o, "owners moved while b and c copied");
    for (name, mg) in [("b", &mut b), ("c", &mut c)] {
        let t = Instant::now();
        let status = mg.terminate(proxy_stop_timeout());
        assert!(status.success(), "{name} exit status {status}; log:\n{}", tail(&mg.log(), 30));
        eprintln!("SIGTERM of {name}: exited after {:?}", t.elapsed());
        std::thread::sleep(Duration::from_secs(2));
    }
    let (_, back) = wait_owned_by(&a, &mirror, 4, &["a"], SESSION);
    eprintln!("scale 3 → 1: a owns everything {back:?} after the last exit");
    std::thread::sleep(Duration::from_secs(2));
    let written = writer.finish();
    let total = 400 + written;
    let ends = wait_caught_up(&a, &mirror, &src, &dst, &topic, 4, Duration::from_secs(90));
    assert_eq!(ends.iter().sum::<i64>(), total as i64);
    verify_identical(&a, &mirror, 4);
    same_records(&source, &a, &topic, total);
    let mut pids = BTreeMap::new();
    for (p, end) in ends.iter().enumerate() {
        let producers = block(dst.describe_producers(&topic, p as i32)).unwrap();
        assert_eq!(producers.len(), 1, "partition {p}: one producer id wrote the mirror: {producers:?}");
        assert_eq!(
            i64::from(producers[0].last_sequence),
            end - 1,
            "partition {p}: the last sequence is the last offset: {producers:?}"
        );
        pids.insert(p, (producers[0].producer_id, producers[0].producer_epoch));
    }
    eprintln!("scale 1 → 3 → 1: {total} records ({written} while scaling), producers {pids:?}, {:?}", t0.elapsed());
}
