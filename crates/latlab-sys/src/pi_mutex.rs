//! A mutex with priority inheritance (`PTHREAD_PRIO_INHERIT`): while a real-time thread waits
//! for it, the thread that holds it runs at the waiter's priority. Without it a normal-priority
//! thread that a real-time load keeps off the CPUs in the middle of its critical section keeps
//! the real-time waiter waiting too, until the kernel's real-time throttling lets it run (up to
//! most of a second): priority inversion. The sampling thread and the coordinator that ends its
//! series share one (see [`crate::sample::SamplerThread`]).
//!
//! No poisoning: a panic while the lock is held unlocks it, and the value is whatever the
//! holder left (the callers push each change whole).

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

/// A value behind a priority-inheriting lock.
pub struct PiMutex<T> {
    /// Boxed: a pthread mutex must not move once initialised.
    raw: Box<UnsafeCell<libc::pthread_mutex_t>>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, which holds the lock; a mutex may be
// locked and unlocked from any thread (each unlock by the thread that locked).
unsafe impl<T: Send> Send for PiMutex<T> {}
// SAFETY: as above: shared references give access to the value only under the lock.
unsafe impl<T: Send> Sync for PiMutex<T> {}

/// The lock held; unlocked when dropped.
pub struct PiGuard<'a, T> {
    mutex: &'a PiMutex<T>,
    /// A pthread mutex is unlocked by the thread that locked it: the guard stays on it.
    _thread: std::marker::PhantomData<*const ()>,
}

impl<T> PiMutex<T> {
    /// `value` behind a new lock, priority-inheriting where the C library and kernel allow
    /// (every Linux since 2.6.18); otherwise a plain mutex, which is still a mutex.
    pub fn new(value: T) -> PiMutex<T> {
        let raw = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        // SAFETY: attr is initialised before use and destroyed after; the mutex is at its
        // final address (boxed) and not yet shared. A failed init with the attribute leaves
        // the static initialiser's plain mutex in place.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            if libc::pthread_mutexattr_init(&mut attr) == 0 {
                if libc::pthread_mutexattr_setprotocol(&mut attr, libc::PTHREAD_PRIO_INHERIT) == 0 {
                    libc::pthread_mutex_init(raw.get(), &attr);
                }
                libc::pthread_mutexattr_destroy(&mut attr);
            }
        }
        PiMutex {
            raw,
            value: UnsafeCell::new(value),
        }
    }

    /// Wait for the lock (lending this thread's priority to the holder meanwhile).
    pub fn lock(&self) -> PiGuard<'_, T> {
        // SAFETY: the mutex is initialised and lives as long as self; a default or PI mutex
        // locked twice by one thread would deadlock, which the guard's borrow of self does
        // not prevent but the callers' one lock at a time does.
        let rc = unsafe { libc::pthread_mutex_lock(self.raw.get()) };
        assert_eq!(rc, 0, "pthread_mutex_lock failed: {rc}");
        PiGuard {
            mutex: self,
            _thread: std::marker::PhantomData,
        }
    }

    /// The value, the lock gone.
    pub fn into_inner(self) -> T {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: self is consumed, so nothing holds the lock; the value is read out once and
        // the mutex destroyed once, and neither is touched again (ManuallyDrop skips Drop).
        unsafe {
            libc::pthread_mutex_destroy(this.raw.get());
            let raw = std::ptr::read(&this.raw);
            drop(raw);
            std::ptr::read(this.value.get())
        }
    }
}

impl<T> Drop for PiMutex<T> {
    fn drop(&mut self) {
        // SAFETY: &mut self: nothing holds the lock.
        unsafe { libc::pthread_mutex_destroy(self.raw.get()) };
    }
}

impl<T> Deref for PiGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> DerefMut for PiGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and &mut self makes this the only reference.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T> Drop for PiGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread locked it (the guard is not Send).
        unsafe { libc::pthread_mutex_unlock(self.mutex.raw.get()) };
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_lock_guards_its_value_across_threads() {
        let m = Arc::new(PiMutex::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let m = Arc::try_unwrap(m).ok().unwrap();
        assert_eq!(m.into_inner(), 40_000);
    }

    #[test]
    fn a_panic_under_the_lock_unlocks_it() {
        let m = Arc::new(PiMutex::new(vec![1]));
        let m2 = Arc::clone(&m);
        let r = std::thread::spawn(move || {
            let mut g = m2.lock();
            g.push(2);
            panic!("while holding the lock");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(*m.lock(), vec![1, 2]);
    }

    /// The kernel's priority of a thread (`prio`, field 18 of its stat: 20 + nice for normal
    /// threads, -1 - priority for real-time ones).
    fn kernel_prio(tid: i32) -> i64 {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(15).unwrap().parse().unwrap()
    }

    /// While a SCHED_FIFO thread waits for the lock, its normal-priority holder runs at the
    /// waiter's priority: what keeps a real-time load from holding both off the CPUs.
    #[test]
    fn a_real_time_waiter_lends_the_holder_its_priority() {
        if crate::thread::euid() != 0 {
            eprintln!("skipped: SCHED_FIFO needs root (CAP_SYS_NICE)");
            return;
        }
        let m = Arc::new(PiMutex::new(()));
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let holder_m = Arc::clone(&m);
        let holder = std::thread::spawn(move || {
            let _g = holder_m.lock();
            held_tx.send(crate::thread::gettid()).unwrap();
            release_rx.recv().unwrap();
        });
        let tid = held_rx.recv().unwrap();
        let normal = kernel_prio(tid);
        assert_eq!(normal, 20, "the holder runs at nice 0");
        let waiter_m = Arc::clone(&m);
        let waiter = std::thread::spawn(move || {
            crate::thread::set_scheduler(libc::SCHED_FIFO, 10).unwrap();
            drop(waiter_m.lock());
        });
        // The waiter blocks at once; give it up to 10 s to be seen (a loaded machine).
        let mut boosted = normal;
        for _ in 0..1000 {
            boosted = kernel_prio(tid);
            if boosted != normal {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        waiter.join().unwrap();
        assert_eq!(boosted, -11, "the holder was not given FIFO 10's priority");
    }
}
