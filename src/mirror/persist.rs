//! The control plane's [`Persist`] over the `__mirror_state` store.

use super::control::{Persist, PersistFuture, StateWrite};
use super::store::StateStore;

impl Persist for StateStore {
    fn write(&self, w: StateWrite) -> PersistFuture<'_> {
        Box::pin(async move {
            let r = match &w {
                StateWrite::Mirror(m) => self.put_mirror(m).await,
                StateWrite::DeleteMirror(n) => self.delete_mirror(n).await,
                StateWrite::Topic(t) => self.put_topic(t).await,
                StateWrite::DeleteTopic(m, t) => self.delete_topic(m, t).await,
                StateWrite::Partition(p) => self.put_partition(p).await,
                StateWrite::DeletePartition(m, t, p) => self.delete_partition(m, t, *p).await,
            };
            r.map_err(|e| e.to_string())
        })
    }

    fn can_store_secrets(&self) -> bool {
        self.settings().secrets.is_some()
    }
}
