//! Shared by the load tests.

use std::time::{Duration, Instant};

/// `read()` once `settled` holds for it, or its value after two seconds. Threads of a stopped
/// load are joined, yet one can stay listed in /proc for a moment: the kernel wakes the joiner
/// (clearing the thread id) before it removes the exiting thread. A leaked thread stays for good.
pub fn after_threads_settle<T>(read: impl Fn() -> T, settled: impl Fn(&T) -> bool) -> T {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let v = read();
        if settled(&v) || Instant::now() >= deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
