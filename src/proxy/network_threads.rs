//! Network threads: the threads that serve client connections, each a single-threaded tokio
//! runtime with its own I/O driver and timer, as the broker's network processors
//! (`num.network.threads`, Kafka's `SocketServer`: each accepted connection is handed to one
//! `Processor` in turn and stays on it). A client connection, both its request side and its
//! response side, lives on one thread from accept to close:
//!
//! - a response due wakes the response task on the thread already running: no other thread
//!   is woken and no task moves between threads (on the shared multi-thread runtime, every
//!   request woke the other worker through a futex, and a connection's halves moved between
//!   workers; docs/performance.md, "Network threads");
//! - the mirror copy loops, the state follower and the admin work stay on the main runtime,
//!   so a busy copy never delays a client's request, and the reverse.
//!
//! A connection that waits on the mirror state or the destination's admin client from a
//! network thread (the mirror RPCs) awaits futures of the main runtime's I/O resources;
//! tokio wakes it across runtimes, so nothing here blocks a thread.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

/// Prefix of the network threads' names (`mirrorgate-net-0`, …), as `top -H` and a profiler
/// show them.
pub const THREAD_NAME_PREFIX: &str = "mirrorgate-net-";

/// A fixed set of network threads; tasks are handed to them in turn (round robin, as
/// Kafka's `Acceptor` assigns connections to processors). Dropping it stops the threads:
/// each drops its runtime, and with it the tasks still on it.
#[derive(Debug)]
pub struct NetworkThreads {
    handles: Vec<Handle>,
    next: AtomicUsize,
    stop: CancellationToken,
}

impl NetworkThreads {
    /// Starts `count` threads (at least 1) and waits until each runtime is up.
    ///
    /// # Errors
    /// A thread or its runtime could not be created (the OS's thread or file limits).
    pub fn start(count: usize) -> std::io::Result<Self> {
        let stop = CancellationToken::new();
        let mut handles = Vec::with_capacity(count.max(1));
        for i in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            handles.push(runtime.handle().clone());
            let stop = stop.clone();
            std::thread::Builder::new().name(format!("{THREAD_NAME_PREFIX}{i}")).spawn(move || {
                // Runs the tasks handed to this thread until the set is dropped.
                runtime.block_on(stop.cancelled());
            })?;
        }
        Ok(NetworkThreads { handles, next: AtomicUsize::new(0), stop })
    }

    /// How many threads there are.
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Always false: there is at least one thread.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Runs `task` on the next thread in turn. Detached: it ends on its own, or with its
    /// thread when the set is dropped.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        drop(self.handles[i].spawn(task));
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

    #[test]
    fn tasks_go_to_each_thread_in_turn_and_each_stays_on_its_thread() {
        let threads = NetworkThreads::start(3).unwrap();
        assert_eq!(threads.len(), 3);
        let (tx, rx) = mpsc::channel();
        for k in 0..6 {
            let tx = tx.clone();
            threads.spawn(async move {
                let before = std::thread::current().name().unwrap().to_string();
                // A task that waits (a timer of its own runtime) resumes on the same thread.
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                let after = std::thread::current().name().unwrap().to_string();
                tx.send((k, before, after)).unwrap();
            });
        }
        let mut seen: Vec<(usize, String, String)> =
            (0..6).map(|_| rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap()).collect();
        seen.sort();
        for (k, before, after) in &seen {
            assert_eq!(before, after, "task {k} moved between threads");
            assert_eq!(before, &format!("{THREAD_NAME_PREFIX}{}", k % 3), "task {k} not on its thread in turn");
        }
    }

    #[test]
    fn dropping_the_set_stops_its_threads_tasks() {
        let threads = NetworkThreads::start(1).unwrap();
        let (tx, rx) = mpsc::channel::<()>();
        threads.spawn(async move {
            // Holds `tx` until the runtime drops the task.
            std::future::pending::<()>().await;
            drop(tx);
        });
        drop(threads);
        // The sender is dropped with the task: recv sees the channel closed, not a timeout.
        assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(5)), Err(mpsc::RecvTimeoutError::Disconnected));
    }
}
