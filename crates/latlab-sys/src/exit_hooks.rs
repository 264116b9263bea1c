//! What to put back if the process has to end at once (a second Ctrl-C while a run winds down
//! too slowly): each part that changes the system while it lives (a tuning applied for a run, a
//! load's processes) registers a hook here, and the registration goes when the part has put
//! things back itself. [`run`] runs the hooks still registered, newest first, each once.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

type Hook = Box<dyn FnOnce() + Send>;

static HOOKS: Mutex<BTreeMap<u64, Hook>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A registered hook; dropping it takes the hook back (the part put things back itself).
#[derive(Debug)]
#[must_use = "the hook is taken back when this is dropped"]
pub struct Registration(u64);

/// Register `hook` to run if the process must end before the part that made it is done.
pub fn register(hook: impl FnOnce() + Send + 'static) -> Registration {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut h) = HOOKS.lock() {
        h.insert(id, Box::new(hook));
    }
    Registration(id)
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Taken out under the lock and dropped after it (a hook may own a registration).
        let hook = HOOKS.lock().ok().and_then(|mut h| h.remove(&self.0));
        drop(hook);
    }
}

/// Run every hook still registered, newest first (what was set up last is put back first).
/// Returns how many ran.
pub fn run() -> usize {
    let mut ran = 0;
    loop {
        let next = HOOKS.lock().ok().and_then(|mut h| h.pop_last());
        let Some((_, hook)) = next else {
            return ran;
        };
        hook();
        ran += 1;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;

    #[test]
    fn hooks_run_newest_first_once_and_a_dropped_registration_runs_none() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let hook = |n: u32| {
            let seen = seen.clone();
            move || seen.lock().unwrap().push(n)
        };
        let a = register(hook(1));
        let b = register(hook(2));
        let c = register(hook(3));
        drop(b);
        assert_eq!(run(), 2);
        assert_eq!(*seen.lock().unwrap(), [3, 1]);
        assert_eq!(run(), 0, "each hook runs once");
        drop((a, c));
        assert_eq!(*seen.lock().unwrap(), [3, 1]);
    }
}
