//! The server's instances, all adapters together, shared so that no adapter (nor a few of them
//! together) can take them all: every loaded adapter keeps [`RESERVED`] of them that the
//! others may not take, fewer only when there are too many adapters to give each that much.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// Instances each loaded adapter can always have, whatever its neighbours do.
pub(crate) const RESERVED: usize = 2;

pub(crate) struct Pool {
    size: usize,
    state: Mutex<State>,
    /// Told whenever an instance is given back or a reservation goes.
    freed: Notify,
}

#[derive(Default)]
struct State {
    in_use: usize,
    adapters: HashMap<String, Usage>,
}

#[derive(Default)]
struct Usage {
    in_use: usize,
    /// Generations loaded under this name (a swap briefly has two).
    loaded: usize,
}

impl State {
    fn usage(&mut self, adapter: &str) -> &mut Usage {
        self.adapters.entry(adapter.to_owned()).or_default()
    }

    fn forget_if_idle(&mut self, adapter: &str) {
        if self
            .adapters
            .get(adapter)
            .is_some_and(|u| u.in_use == 0 && u.loaded == 0)
        {
            self.adapters.remove(adapter);
        }
    }

    /// Whether `adapter` may take one more instance of `size` and still leave every other
    /// loaded adapter what it is owed of its reservation.
    fn may_take(&self, size: usize, adapter: &str) -> bool {
        let loaded = self.adapters.values().filter(|u| u.loaded > 0).count();
        let reserve = RESERVED.min(size.checked_div(loaded).unwrap_or(0));
        let owed: usize = self
            .adapters
            .iter()
            .filter(|(name, usage)| usage.loaded > 0 && name.as_str() != adapter)
            .map(|(_, usage)| reserve.saturating_sub(usage.in_use))
            .sum();
        self.in_use + 1 + owed <= size
    }
}

impl Pool {
    pub(super) fn new(size: usize) -> Arc<Self> {
        Arc::new(Self {
            size,
            state: Mutex::default(),
            freed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The instances each adapter has in use now.
    pub(super) fn in_use(&self) -> Vec<(String, usize)> {
        self.lock()
            .adapters
            .iter()
            .map(|(name, usage)| (name.clone(), usage.in_use))
            .collect()
    }

    /// Counts `adapter` among the loaded ones (its reservation holds) while this lives.
    pub(super) fn join(self: &Arc<Self>, adapter: &str) -> Membership {
        self.lock().usage(adapter).loaded += 1;
        Membership {
            pool: Arc::clone(self),
            adapter: adapter.to_owned(),
        }
    }

    /// An instance for `adapter`, if one is free for it now.
    pub(crate) fn try_take(self: &Arc<Self>, adapter: &str) -> Option<Instance> {
        let mut state = self.lock();
        if !state.may_take(self.size, adapter) {
            return None;
        }
        state.in_use += 1;
        state.usage(adapter).in_use += 1;
        Some(Instance {
            pool: Arc::clone(self),
            adapter: adapter.to_owned(),
        })
    }

    /// An instance for `adapter`, waiting until one is free for it.
    pub(super) async fn take(self: &Arc<Self>, adapter: &str) -> Instance {
        loop {
            // Registered before looking, so a release in between is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if let Some(instance) = self.try_take(adapter) {
                return instance;
            }
            freed.await;
        }
    }
}

/// An adapter counted among the loaded ones.
pub struct Membership {
    pool: Arc<Pool>,
    adapter: String,
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        state.usage(&self.adapter).loaded -= 1;
        state.forget_if_idle(&self.adapter);
        drop(state);
        self.pool.freed.notify_waiters();
    }
}

/// One instance in use, given back when dropped.
pub(crate) struct Instance {
    pool: Arc<Pool>,
    adapter: String,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        state.in_use -= 1;
        state.usage(&self.adapter).in_use -= 1;
        state.forget_if_idle(&self.adapter);
        drop(state);
        self.pool.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_loaded_adapter_keeps_its_reservation() {
        let pool = Pool::new(8);
        let _members: Vec<Membership> = ["greedy", "quiet", "other"]
            .iter()
            .map(|name| pool.join(name))
            .collect();
        let greedy: Vec<Instance> = std::iter::from_fn(|| pool.try_take("greedy"))
            .take(100)
            .collect();
        assert_eq!(
            greedy.len(),
            8 - 2 * RESERVED,
            "the others' reservations stay"
        );
        let quiet: Vec<Instance> = std::iter::from_fn(|| pool.try_take("quiet"))
            .take(100)
            .collect();
        assert_eq!(quiet.len(), RESERVED);
        assert!(pool.try_take("other").is_some());
        // Not loaded (a component being described): only what nobody is owed.
        assert!(pool.try_take("new component").is_none());
        drop(greedy);
        assert!(pool.try_take("new component").is_some());
    }

    #[test]
    fn reservations_shrink_to_fit_many_adapters_and_go_with_them() {
        let pool = Pool::new(4);
        let members: Vec<Membership> = (0..8).map(|i| pool.join(&format!("a{i}"))).collect();
        let taken: Vec<Instance> = std::iter::from_fn(|| pool.try_take("a0")).take(9).collect();
        assert_eq!(taken.len(), 4, "too many to reserve any: first come");
        drop(taken);
        drop(members);
        let lone = pool.join("lone");
        let all: Vec<Instance> = std::iter::from_fn(|| pool.try_take("lone"))
            .take(9)
            .collect();
        assert_eq!(all.len(), 4, "nobody else is owed anything");
        drop(lone);
    }

    #[tokio::test]
    async fn a_waiter_gets_the_instance_given_back() {
        // Two adapters, two instances: one each.
        let pool = Pool::new(2);
        let _a = pool.join("a");
        let _b = pool.join("b");
        let held = pool.try_take("a").unwrap();
        let waiting = tokio::spawn({
            let pool = Arc::clone(&pool);
            async move { pool.take("a").await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "b's reservation is not a's");
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when an instance came back")
            .unwrap();
    }
}
