//! What the monitor's test files share: the daemon as they run it and what they read back.
#![allow(dead_code)]

use latlab_store::{Store, WindowSetRow};
use latlab_testkit::{latlab, policy_args};
use std::path::Path;
use std::process::Command;

pub const END: u64 = i64::MAX as u64;

/// `latlab monitor` with 1 s windows at 1 ms on every CPU storing into `db` (SCHED_FIFO as
/// root, otherwise SCHED_OTHER), then `extra`.
pub fn monitor(db: &Path, extra: &[&str]) -> Command {
    let mut c = latlab!();
    c.args(["monitor", "--window", "1s", "--interval", "1ms", "--db"])
        .arg(db)
        .args(policy_args())
        .args(extra);
    c
}

/// The window sets of series `name` (none while the store cannot be read).
pub fn sets(db: &Path, name: &str) -> Vec<WindowSetRow> {
    let Ok(store) = Store::open_existing(db) else {
        return Vec::new();
    };
    let Ok(Some(id)) = store.find_series(name) else {
        return Vec::new();
    };
    store.monitor_sets(id, 0, END).unwrap_or_default()
}
