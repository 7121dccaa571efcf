//! Network threads: the threads that serve client connections, each a single-threaded tokio
//! runtime with its own I/O driver and timer, as the broker's network processors
//! (`num.network.threads`, Kafka's `SocketServer`: each accepted connection is handed to one
//! `Processor` and stays on it). A client connection, both its request side and its
//! response side, lives on one thread from accept to close:
//!
//! - a response due wakes the response task on the thread already running: no other thread
//!   is woken and no task moves between threads (on the shared multi-thread runtime a
//!   connection's two tasks could run on two workers, and a request then woke the other one
//!   through a futex; docs/performance.md, "Network threads");
//! - the mirror copy loops, the state follower and the admin work stay on the main runtime:
//!   the mirror RPCs and the config and ACL reads they need are handed to it
//!   ([`super::mirror_gate::MirrorGate::runs_on_main`]), so the shared cluster clients open
//!   their connections there and slow admin work never holds up a network thread.
//!
//! A connection goes to the thread serving the fewest open connections (the first of them on
//! a tie), so that long-lived connections spread evenly however clients open and close their
//! bootstrap connections.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

use super::open_count::OpenCount;

/// Prefix of the network threads' names (`mg-net-0`, …, their blocking threads
/// `mg-net-0-blk`), as `top -H` and a profiler show them: Linux keeps 15 bytes of a name.
pub const THREAD_NAME_PREFIX: &str = "mg-net-";

/// Blocking-pool threads of one network thread's runtime at most (used by DNS lookups of
/// `host:port` connects).
const MAX_BLOCKING_THREADS: usize = 16;
/// How long a stopping network thread waits for its blocking-pool threads (a DNS lookup in
/// progress) before it leaves them behind.
const BLOCKING_SHUTDOWN: Duration = Duration::from_secs(1);

/// One network thread: its runtime's handle and the tasks it serves.
#[derive(Debug)]
struct Thread {
    handle: Handle,
    open: Arc<AtomicUsize>,
    /// Cancelled by the thread once its runtime, and every task on it, is gone.
    stopped: CancellationToken,
}

/// A fixed set of network threads. Dropping it, or [`NetworkThreads::shutdown`], stops the
/// threads: each drops its runtime, and with it the tasks still on it.
#[derive(Debug)]
pub struct NetworkThreads {
    threads: Vec<Thread>,
    stop: CancellationToken,
}

impl NetworkThreads {
    /// Starts `count` threads (at least 1); returns once each runtime is up.
    ///
    /// # Errors
    /// A thread or its runtime could not be created (the OS's thread or file limits); the
    /// threads already started are stopped.
    pub fn start(count: usize) -> std::io::Result<Self> {
        let mut set = NetworkThreads { threads: Vec::with_capacity(count.max(1)), stop: CancellationToken::new() };
        for i in 0..count.max(1) {
            let (tx, rx) = std::sync::mpsc::channel();
            let stop = set.stop.clone();
            let stopped = CancellationToken::new();
            let done = stopped.clone();
            let name = format!("{THREAD_NAME_PREFIX}{i}");
            let blocking_name = format!("{name}-blk");
            // The runtime is built and dropped on its own thread, never inside another
            // runtime's context (where dropping one panics).
            std::thread::Builder::new().name(name).spawn(move || {
                // Told however the thread ends (a panic included).
                let _stopped = done.drop_guard();
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .thread_name(blocking_name)
                    .max_blocking_threads(MAX_BLOCKING_THREADS)
                    .build();
                match runtime {
                    Ok(runtime) => {
                        let _ = tx.send(Ok(runtime.handle().clone()));
                        runtime.block_on(stop.cancelled());
                        // Drops the tasks still on it (their connections close).
                        runtime.shutdown_timeout(BLOCKING_SHUTDOWN);
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })?;
            let handle =
                rx.recv().map_err(|_| std::io::Error::other("a network thread ended before its runtime started"))??;
            set.threads.push(Thread { handle, open: Arc::default(), stopped });
        }
        Ok(set)
    }

    /// How many threads there are.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Always false: there is at least one thread.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Runs `task` on the thread with the fewest open tasks. Detached: it ends on its own,
    /// or with its thread when the set stops.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let thread =
            self.threads.iter().min_by_key(|t| t.open.load(Ordering::Acquire)).expect("at least one network thread");
        // Open on this thread until the task ends or is dropped with the runtime.
        let open = OpenCount::hold(thread.open.clone());
        drop(thread.handle.spawn(async move {
            let _open = open;
            task.await;
        }));
    }

    /// Stops the threads: their tasks are dropped (connections still open close).
    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    /// Stops the threads and waits, at most `timeout`, until each has dropped its runtime and
    /// the tasks on it (a connection dropped so closes without a log line of its own); whether
    /// all did.
    pub async fn stop(&self, timeout: Duration) -> bool {
        self.shutdown();
        let deadline = tokio::time::Instant::now() + timeout;
        for t in &self.threads {
            if tokio::time::timeout_at(deadline, t.stopped.cancelled()).await.is_err() {
                return false;
            }
        }
        true
    }
}

impl Drop for NetworkThreads {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn each_task_stays_on_its_thread_and_goes_where_fewest_are_open() {
        let threads = NetworkThreads::start(3).unwrap();
        assert_eq!(threads.len(), 3);
        let (tx, rx) = mpsc::channel();
        let release = CancellationToken::new();
        // Three long-lived tasks: one on each thread.
        for k in 0..3 {
            let (tx, release) = (tx.clone(), release.clone());
            threads.spawn(async move {
                let before = std::thread::current().name().unwrap().to_string();
                // A task that waits (a timer of its own runtime) resumes on the same thread.
                tokio::time::sleep(Duration::from_millis(5)).await;
                let after = std::thread::current().name().unwrap().to_string();
                // The name the OS shows (`top -H`, perf), which Linux cuts at 15 bytes.
                #[cfg(target_os = "linux")]
                assert_eq!(std::fs::read_to_string("/proc/thread-self/comm").unwrap().trim_end(), after);
                tx.send((k, before, after)).unwrap();
                release.cancelled().await;
            });
        }
        let mut seen: Vec<(usize, String, String)> =
            (0..3).map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap()).collect();
        seen.sort();
        for (k, before, after) in &seen {
            assert_eq!(before, after, "task {k} moved between threads");
            assert_eq!(before, &format!("{THREAD_NAME_PREFIX}{k}"), "task {k} not on the least loaded thread");
        }
        // Short tasks that ended free their thread: the next ones still spread evenly.
        let (done_tx, done_rx) = mpsc::channel();
        let done_tx2 = done_tx.clone();
        threads.spawn(async move { done_tx2.send(std::thread::current().name().unwrap().to_string()).unwrap() });
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(5)).unwrap(), format!("{THREAD_NAME_PREFIX}0"));
        // Wait until that task's count is given back, then fill thread 0 with a long one.
        let wait_until = std::time::Instant::now() + Duration::from_secs(5);
        while threads.threads[0].open.load(Ordering::Acquire) != 1 {
            assert!(std::time::Instant::now() < wait_until, "the ended task still counts as open");
            std::thread::sleep(Duration::from_millis(1));
        }
        let release2 = CancellationToken::new();
        let r = release2.clone();
        threads.spawn(async move { r.cancelled().await });
        threads.spawn(async move { done_tx.send(std::thread::current().name().unwrap().to_string()).unwrap() });
        assert_eq!(done_rx.recv_timeout(Duration::from_secs(5)).unwrap(), format!("{THREAD_NAME_PREFIX}1"));
        release.cancel();
        release2.cancel();
    }

    #[test]
    fn stopping_the_set_drops_its_threads_tasks() {
        let threads = NetworkThreads::start(1).unwrap();
        let (tx, rx) = mpsc::channel::<()>();
        threads.spawn(async move {
            // Holds `tx` until the runtime drops the task.
            std::future::pending::<()>().await;
            drop(tx);
        });
        threads.shutdown();
        // The sender is dropped with the task: recv sees the channel closed, not a timeout.
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Err(mpsc::RecvTimeoutError::Disconnected));
        let wait_until = std::time::Instant::now() + Duration::from_secs(5);
        while threads.threads[0].open.load(Ordering::Acquire) != 0 {
            assert!(std::time::Instant::now() < wait_until, "a dropped task still counts as open");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// `stop` returns once every thread has dropped its runtime: a task's drop has run by then.
    #[tokio::test]
    async fn stop_waits_until_every_thread_has_dropped_its_tasks() {
        let threads = NetworkThreads::start(2).unwrap();
        let dropped = Arc::new(AtomicUsize::new(0));
        struct CountDrop(Arc<AtomicUsize>);
        impl Drop for CountDrop {
            fn drop(&mut self) {
                // Slow enough that a stop which did not wait would see it unfinished.
                std::thread::sleep(Duration::from_millis(50));
                self.0.fetch_add(1, Ordering::AcqRel);
            }
        }
        for _ in 0..2 {
            let guard = CountDrop(dropped.clone());
            threads.spawn(async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            });
        }
        assert!(threads.stop(Duration::from_secs(5)).await, "the threads did not stop");
        assert_eq!(dropped.load(Ordering::Acquire), 2, "stop returned before the tasks were dropped");
        assert!(threads.threads.iter().all(|t| t.stopped.is_cancelled()));
    }
}
