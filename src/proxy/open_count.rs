//! A count of open things (client connections for the shutdown's drain, tasks per network
//! thread) kept by a guard: incremented when the guard is made, decremented when it is
//! dropped, also when the task holding it panics or is dropped with its runtime.

use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Holds one unit of a count until dropped. `C` is how the count is reached: `&AtomicUsize`
/// within a borrow, `Arc<AtomicUsize>` in a `'static` task.
#[derive(Debug)]
pub struct OpenCount<C: Deref<Target = AtomicUsize>>(C);

impl<C: Deref<Target = AtomicUsize>> OpenCount<C> {
    /// Adds one to `count`; the guard takes it away again when dropped.
    pub fn hold(count: C) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        OpenCount(count)
    }
}

impl<C: Deref<Target = AtomicUsize>> Drop for OpenCount<C> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_count_is_held_until_the_guard_is_dropped() {
        let count = AtomicUsize::new(0);
        let a = OpenCount::hold(&count);
        let b = OpenCount::hold(&count);
        assert_eq!(count.load(Ordering::Acquire), 2);
        drop(a);
        assert_eq!(count.load(Ordering::Acquire), 1);
        drop(b);
        assert_eq!(count.load(Ordering::Acquire), 0);
    }

    #[test]
    fn a_panicking_holder_gives_its_unit_back() {
        let count = Arc::new(AtomicUsize::new(0));
        let held = count.clone();
        let joined = std::thread::spawn(move || {
            let _open = OpenCount::hold(held);
            panic!("the holder fails");
        })
        .join();
        assert!(joined.is_err());
        assert_eq!(count.load(Ordering::Acquire), 0);
    }
}
