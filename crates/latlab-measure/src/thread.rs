//! The measuring threads. The hot loop does the wait, one clock read and one histogram record;
//! everything else (missed periods, maxima, spikes, the break check) sits behind one compare
//! against a threshold and runs only for samples that need it.

use crate::StopSignal;
use crate::os::{self, timespec};
use crate::window::WindowSink;
use latlab_model::{Method, StopReason};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// What every measuring thread knows about the run.
#[derive(Clone)]
pub struct Ctx {
    pub index: u32,
    pub clock: libc::clockid_t,
    pub interval: u64,
    /// Start of the run on `clock`; the first deadline is `start + phase + interval`.
    pub start: u64,
    /// This thread's offset within the period (`--stagger`; 0 by default).
    pub phase: u64,
    /// Last period index (1-based) to measure, `u64::MAX` when unbounded.
    pub last_period: u64,
    /// Length of the run for the busy method (`u64::MAX`: unbounded).
    pub duration: u64,
    pub window: u64,
    pub spike: u64,
    pub brk: u64,
    pub stop: Arc<StopSignal>,
    pub trace_marker: Option<std::path::PathBuf>,
    pub label: String,
    /// Told of every spike kept (`--trace`: to read the kernel's story while it is fresh).
    pub hook: Option<Arc<dyn crate::SpikeHook>>,
}

impl Ctx {
    /// Work for samples above the threshold: missed periods, window maximum, spikes, break.
    /// Returns how many periods the sample covered beyond its own.
    #[cold]
    #[inline(never)]
    /// `max_skip` bounds the periods a late sample may cover (0 where lateness skips nothing),
    /// `room` is how many of them are due within the current window; `now` is when the thread
    /// ran, on the run's clock.
    fn slow_path(
        &self,
        sink: &mut WindowSink,
        lat: u64,
        at: u64,
        now: u64,
        (max_skip, room): (u64, u64),
    ) -> u64 {
        let mut skipped = 0;
        if lat > self.interval && self.interval > 0 && max_skip > 0 {
            skipped = ((lat - 1) / self.interval).min(max_skip);
            if skipped > 0 {
                sink.cur
                    .add_stall(lat, skipped, skipped.saturating_sub(room));
            }
        }
        let buf = &mut sink.cur;
        // The sample is already recorded: it is the window's maximum if it equals it (the
        // threshold sends only samples above the previous maximum here, so the first wins).
        if lat >= buf.hist.max() {
            buf.max_at = at;
        }
        if lat > self.spike
            && buf.add_spike(at, lat)
            && let Some(hook) = &self.hook
        {
            hook.spike(self.index, at, now.saturating_sub(lat), now);
        }
        if lat > self.brk {
            self.stop.request(StopReason::Break {
                thread: self.index,
                value_ns: lat,
            });
            if let Some(path) = &self.trace_marker {
                let msg = format!(
                    "latlab: break: {} latency {} us > {} us\n",
                    self.label,
                    lat / 1000,
                    self.brk / 1000
                );
                if std::fs::write(path, msg).is_ok() {
                    self.stop.marker_written(path);
                }
            }
        }
        skipped
    }

    /// The threshold above which a sample needs the slow path.
    #[inline]
    fn threshold(&self, window_max: u64) -> u64 {
        window_max.min(self.interval).min(self.spike).min(self.brk)
    }
}

/// How a timer-driven thread waits for a deadline.
pub trait Waiter {
    /// Start a periodic timer whose first expiry is `first` (only waiters driven by one).
    fn arm(&mut self, _first: u64, _interval: u64) -> io::Result<()> {
        Ok(())
    }
    /// Block until `deadline` (absolute, on the run's clock). `last_now` is the last clock read,
    /// the base of relative waits.
    fn wait(&mut self, deadline: u64, last_now: u64);
}

pub struct AbsSleep(pub libc::clockid_t);
impl Waiter for AbsSleep {
    #[inline(always)]
    fn wait(&mut self, deadline: u64, _: u64) {
        let ts = timespec(deadline);
        // The raw system call: glibc's wrapper adds cancellation-point bookkeeping to every loop.
        // SAFETY: ts is valid; the remaining-time pointer is unused for absolute sleeps.
        unsafe {
            libc::syscall(
                libc::SYS_clock_nanosleep,
                self.0,
                libc::TIMER_ABSTIME,
                &ts as *const libc::timespec,
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
    }
}

pub struct RelSleep(pub libc::clockid_t);
impl Waiter for RelSleep {
    #[inline(always)]
    fn wait(&mut self, deadline: u64, last_now: u64) {
        let ts = timespec(deadline.saturating_sub(last_now));
        // SAFETY: as above.
        unsafe {
            libc::syscall(
                libc::SYS_clock_nanosleep,
                self.0,
                0,
                &ts as *const libc::timespec,
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
    }
}

pub struct NanoSleep;
impl Waiter for NanoSleep {
    #[inline(always)]
    fn wait(&mut self, deadline: u64, last_now: u64) {
        let ts = timespec(deadline.saturating_sub(last_now));
        // SAFETY: as above.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }
}

pub struct Poll;
impl Waiter for Poll {
    #[inline(always)]
    fn wait(&mut self, deadline: u64, last_now: u64) {
        let ts = timespec(deadline.saturating_sub(last_now));
        // SAFETY: no descriptors; a valid timeout; no signal mask change.
        unsafe { libc::ppoll(std::ptr::null_mut(), 0, &ts, std::ptr::null()) };
    }
}

pub struct Select;
impl Waiter for Select {
    #[inline(always)]
    fn wait(&mut self, deadline: u64, last_now: u64) {
        let ts = timespec(deadline.saturating_sub(last_now));
        // SAFETY: no descriptor sets; a valid timeout; no signal mask change.
        unsafe {
            libc::pselect(
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &ts,
                std::ptr::null(),
            )
        };
    }
}

/// A periodic absolute timerfd; each `read` returns after the next expiry.
pub struct TimerFd(libc::c_int);
impl TimerFd {
    pub fn new(clock: libc::clockid_t) -> io::Result<TimerFd> {
        // SAFETY: plain system call.
        let fd = unsafe { libc::timerfd_create(clock, libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(TimerFd(fd))
    }
}
impl Waiter for TimerFd {
    fn arm(&mut self, first: u64, interval: u64) -> io::Result<()> {
        let spec = os::itimerspec(first, interval);
        // SAFETY: fd is ours; spec valid.
        os::check(unsafe {
            libc::timerfd_settime(self.0, libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut())
        })
    }
    #[inline(always)]
    fn wait(&mut self, _: u64, _: u64) {
        let mut expirations = 0u64;
        // SAFETY: reads 8 bytes into a u64.
        unsafe { libc::read(self.0, (&mut expirations as *mut u64).cast(), 8) };
    }
}
impl Drop for TimerFd {
    fn drop(&mut self) {
        // SAFETY: fd is ours.
        unsafe { libc::close(self.0) };
    }
}

/// A periodic absolute POSIX timer whose expiry is a signal to this thread.
pub struct PosixTimer {
    timer: libc::timer_t,
    set: libc::sigset_t,
}
impl PosixTimer {
    pub fn new(clock: libc::clockid_t) -> io::Result<PosixTimer> {
        let sig = os::timer_signal();
        // SAFETY: sigevent is plain data; only the documented fields are set.
        unsafe {
            let mut ev: libc::sigevent = std::mem::zeroed();
            ev.sigev_notify = libc::SIGEV_THREAD_ID;
            ev.sigev_signo = sig;
            ev.sigev_notify_thread_id = latlab_sys::thread::gettid();
            let mut timer: libc::timer_t = std::mem::zeroed();
            if libc::timer_create(clock, &mut ev, &mut timer) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(PosixTimer {
                timer,
                set: os::sigset_of(&[sig]),
            })
        }
    }
}
// SAFETY: the timer handle is only an id; the timer is used and deleted by one thread at a time.
unsafe impl Send for PosixTimer {}
impl Waiter for PosixTimer {
    fn arm(&mut self, first: u64, interval: u64) -> io::Result<()> {
        let spec = os::itimerspec(first, interval);
        // SAFETY: the timer is ours; spec valid.
        os::check(unsafe {
            libc::timer_settime(self.timer, libc::TIMER_ABSTIME, &spec, std::ptr::null_mut())
        })
    }
    #[inline(always)]
    fn wait(&mut self, _: u64, _: u64) {
        // SAFETY: the set is initialised; siginfo is not needed.
        unsafe { libc::sigwaitinfo(&self.set, std::ptr::null_mut()) };
    }
}
impl Drop for PosixTimer {
    fn drop(&mut self) {
        // SAFETY: the timer is ours.
        unsafe { libc::timer_delete(self.timer) };
    }
}

/// The timer-driven loop shared by every timer method.
pub fn timer_loop<W: Waiter>(w: &mut W, ctx: &Ctx, sink: &mut WindowSink) -> io::Result<()> {
    let (interval, start) = (ctx.interval, ctx.start + ctx.phase);
    w.arm(start + interval, interval)?;
    let mut period = 1u64;
    let mut next = start + interval;
    let mut now = start;
    // Windows are counted from this thread's own start, so each holds the same periods on
    // every thread whatever its phase.
    let mut win_end = start + ctx.window;
    let mut slow = 0u64;
    loop {
        loop {
            w.wait(next, now);
            now = os::now(ctx.clock);
            if now >= next {
                break;
            }
            // Woken early (an interrupted relative sleep): wait again unless told to stop.
            if ctx.stop.is_set() {
                return Ok(());
            }
        }
        let lat = now - next;
        sink.cur.hist.record(lat);
        let mut skipped = 0;
        if lat > slow {
            // Periods after this one that are due within the current window.
            let room = (win_end - next) / interval;
            skipped = ctx.slow_path(
                sink,
                lat,
                next - ctx.start,
                now,
                (ctx.last_period - period, room),
            );
            slow = ctx.threshold(sink.cur.hist.max());
        }
        period += 1 + skipped;
        next += interval * (1 + skipped);
        if period > ctx.last_period || ctx.stop.is_set() {
            return Ok(());
        }
        // A period belongs to the window its deadline falls in; a deadline on a boundary
        // closes its window.
        if next > win_end {
            let index = (next - start - 1) / ctx.window;
            sink.rotate(index);
            win_end = start + (index + 1) * ctx.window;
            slow = 0;
        }
    }
}

/// The busy method: spin on the clock; each gap between two reads is a sample (OS noise).
pub fn busy_loop(ctx: &Ctx, sink: &mut WindowSink) -> io::Result<()> {
    const POLL_NS: u64 = 1_000_000;
    let start = ctx.start;
    let end = start.saturating_add(ctx.duration);
    let mut win_end = start + ctx.window;
    let mut prev = os::now(ctx.clock);
    let mut check_at = (prev + POLL_NS).min(win_end).min(end);
    let mut slow = 0u64;
    loop {
        let now = os::now(ctx.clock);
        let gap = now - prev;
        prev = now;
        sink.cur.hist.record(gap);
        if gap > slow {
            ctx.slow_path(sink, gap, now.saturating_sub(start), now, (0, 0));
            slow = ctx.threshold(sink.cur.hist.max());
        }
        if now >= check_at {
            if now >= end || ctx.stop.is_set() {
                return Ok(());
            }
            if now >= win_end {
                let index = (now - start) / ctx.window;
                sink.rotate(index);
                win_end = start + (index + 1) * ctx.window;
                slow = 0;
            }
            check_at = (now + POLL_NS).min(win_end).min(end);
        }
    }
}

/// The waker overwrote stamps while the woken thread read them.
struct Lapped;

/// How many wakes' stamps a [`WakeSlot`] keeps.
const STAMPS: u32 = 8;

/// The state a waker thread shares with the thread it wakes.
pub struct WakeSlot {
    /// Incremented once per wake; also the futex word.
    pub seq: AtomicU32,
    /// Per wake (at `seq % STAMPS`): the clock reading just before the wake call, and the
    /// deadline of its period (ns after start). The last few are kept: the woken thread reads
    /// its clock before it reads which wake is the newest, and a wake published in between is
    /// not the one that woke it.
    stamps: [(AtomicU64, AtomicU64); STAMPS as usize],
    done: AtomicBool,
    /// Thread id of the woken thread (for the signal method).
    pub tid: AtomicU32,
    pub efd: libc::c_int,
    pub pipe: [libc::c_int; 2],
}

impl WakeSlot {
    pub fn new(method: Method) -> io::Result<WakeSlot> {
        let mut slot = WakeSlot {
            seq: AtomicU32::new(0),
            stamps: std::array::from_fn(|_| (AtomicU64::new(0), AtomicU64::new(0))),
            done: AtomicBool::new(false),
            tid: AtomicU32::new(0),
            efd: -1,
            pipe: [-1, -1],
        };
        match method {
            Method::Eventfd => {
                // SAFETY: plain system call.
                slot.efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
                if slot.efd < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            // SAFETY: pipe writes two descriptors into the array.
            Method::Pipe if unsafe { libc::pipe2(slot.pipe.as_mut_ptr(), libc::O_CLOEXEC) } < 0 => {
                return Err(io::Error::last_os_error());
            }
            _ => {}
        }
        Ok(slot)
    }

    /// Publish the next wake: its stamp (the clock now) and its period's deadline `at`.
    #[inline(always)]
    fn publish(&self, clock: libc::clockid_t, at: u64) {
        let seq = self.seq.load(Ordering::Relaxed).wrapping_add(1);
        let (stamp, deadline) = &self.stamps[(seq % STAMPS) as usize];
        // The slot's last reader must see it rewritten only after `seq` moved past it.
        std::sync::atomic::fence(Ordering::Release);
        deadline.store(at, Ordering::Relaxed);
        stamp.store(os::now(clock), Ordering::Relaxed);
        self.seq.store(seq, Ordering::Release);
    }

    /// The final wake: it carries no sample (its stamp is later than any clock reading), and
    /// `done` is set after it, so a thread that sees `done` sees it too.
    pub fn finish(&self) {
        let seq = self.seq.load(Ordering::Relaxed).wrapping_add(1);
        std::sync::atomic::fence(Ordering::Release);
        self.stamps[(seq % STAMPS) as usize]
            .0
            .store(u64::MAX, Ordering::Relaxed);
        self.seq.store(seq, Ordering::Release);
        self.done.store(true, Ordering::Release);
    }

    /// The newest wake after `seen` (up to `newest`) stamped at or before `now`, the clock
    /// reading of the thread it woke: `(wake, stamp, deadline)`. A wake stamped later was
    /// published after that reading and did not wake it; it is left for the next turn. `None`
    /// when every wake after `seen` is stamped later; `Err(Lapped)` when the waker moved on so
    /// far meanwhile (the thread was off its CPU for several periods) that the stamps it read
    /// may be overwritten: read the clock again.
    #[inline(always)]
    fn newest_before(
        &self,
        seen: u32,
        newest: u32,
        now: u64,
    ) -> Result<Option<(u32, u64, u64)>, Lapped> {
        let mut k = newest;
        let found = loop {
            if k == seen {
                return Ok(None);
            }
            if newest.wrapping_sub(k) >= STAMPS - 2 {
                return Err(Lapped);
            }
            let (stamp, deadline) = &self.stamps[(k % STAMPS) as usize];
            let t = stamp.load(Ordering::Relaxed);
            if t <= now {
                break (k, t, deadline.load(Ordering::Relaxed));
            }
            k = k.wrapping_sub(1);
        };
        std::sync::atomic::fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed).wrapping_sub(found.0) >= STAMPS - 1 {
            return Err(Lapped);
        }
        Ok(Some(found))
    }

    /// Wake the measuring thread.
    #[inline(always)]
    fn wake(&self, method: Method) {
        // SAFETY (all arms): descriptors and addresses are owned by this slot and live.
        unsafe {
            match method {
                Method::Futex => {
                    libc::syscall(
                        libc::SYS_futex,
                        self.seq.as_ptr(),
                        libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                        1,
                    );
                }
                Method::Eventfd => {
                    let one = 1u64;
                    libc::write(self.efd, (&one as *const u64).cast(), 8);
                }
                Method::Pipe => {
                    let b = 1u8;
                    libc::write(self.pipe[1], (&b as *const u8).cast(), 1);
                }
                Method::Signal => {
                    libc::syscall(
                        libc::SYS_tgkill,
                        libc::getpid(),
                        self.tid.load(Ordering::Relaxed) as libc::pid_t,
                        os::wake_signal(),
                    );
                }
                _ => {}
            }
        }
    }

    /// Block until the waker has woken us (or may have).
    #[inline(always)]
    fn wait(&self, method: Method, seen: u32, sigset: &libc::sigset_t) {
        // SAFETY (all arms): as above.
        unsafe {
            match method {
                Method::Futex if self.seq.load(Ordering::Acquire) == seen => {
                    libc::syscall(
                        libc::SYS_futex,
                        self.seq.as_ptr(),
                        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                        seen,
                        std::ptr::null::<libc::timespec>(),
                    );
                }
                Method::Eventfd => {
                    let mut v = 0u64;
                    libc::read(self.efd, (&mut v as *mut u64).cast(), 8);
                }
                Method::Pipe => {
                    let mut b = [0u8; 64];
                    libc::read(self.pipe[0], b.as_mut_ptr().cast(), b.len());
                }
                Method::Signal => {
                    libc::sigwaitinfo(sigset, std::ptr::null_mut());
                }
                _ => {}
            }
        }
    }
}

impl Drop for WakeSlot {
    fn drop(&mut self) {
        for fd in [self.efd, self.pipe[0], self.pipe[1]] {
            if fd >= 0 {
                // SAFETY: the descriptor is ours.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// The waker: sleeps to each absolute deadline, stamps the time and wakes its thread.
pub fn waker_loop(ctx: &Ctx, slot: &WakeSlot, method: Method) {
    let (interval, start) = (ctx.interval, ctx.start + ctx.phase);
    let mut sleeper = AbsSleep(ctx.clock);
    let mut period = 1u64;
    let mut next = start + interval;
    loop {
        sleeper.wait(next, 0);
        let woke = os::now(ctx.clock);
        if woke < next {
            continue;
        }
        // Periods this waker slept through are missed: no wake-up happened for them. The
        // woken thread counts them from the gap in the deadlines it is given.
        let late = woke - next;
        if late > interval {
            let skipped = ((late - 1) / interval).min(ctx.last_period.saturating_sub(period));
            period += skipped;
            next += skipped * interval;
        }
        slot.publish(ctx.clock, next - start);
        slot.wake(method);
        period += 1;
        next += interval;
        if period > ctx.last_period || ctx.stop.is_set() {
            break;
        }
    }
    slot.finish();
    slot.wake(method);
}

/// The woken thread: latency from the waker's wake call to this thread running.
pub fn wakee_loop(ctx: &Ctx, slot: &WakeSlot, method: Method, sink: &mut WindowSink) {
    let sigset = os::sigset_of(&[os::wake_signal()]);
    let mut seen = 0u32;
    // The deadline of the last wake taken: a later one more than an interval past it follows
    // missed periods.
    let mut last_at = 0u64;
    let mut win_end = ctx.window;
    let mut slow = 0u64;
    loop {
        slot.wait(method, seen, &sigset);
        let mut now = os::now(ctx.clock);
        let (newest, done, woke) = loop {
            // `done` first: once it is set, `seq` holds the final bump (a wake stamped "never").
            let done = slot.done.load(Ordering::Acquire);
            let seq = slot.seq.load(Ordering::Acquire);
            let newest = seq.wrapping_sub(u32::from(done));
            match slot.newest_before(seen, newest, now) {
                Ok(woke) => break (newest, done, woke),
                Err(Lapped) => now = os::now(ctx.clock),
            }
        };
        if let Some((wake, stamp, at)) = woke {
            let lat = now - stamp;
            // Nominal deadline (ns after this thread's start): windows count from it.
            let gap = at - last_at;
            if at > win_end {
                if gap > ctx.interval {
                    // The missed periods before this one fall in the window it closes.
                    missed_before(ctx, sink, lat, gap);
                }
                let index = (at - 1) / ctx.window;
                sink.rotate(index);
                win_end = (index + 1) * ctx.window;
                slow = 0;
            } else if gap > ctx.interval {
                missed_before(ctx, sink, lat, gap);
            }
            sink.cur.hist.record(lat);
            if lat > slow {
                ctx.slow_path(sink, lat, at + ctx.phase, now, (0, 0));
                slow = ctx.threshold(sink.cur.hist.max());
            }
            seen = wake;
            last_at = at;
        }
        // Wakes published after the clock was read are taken on the next turn (their wake
        // calls are still to come, or pending); the end, once they are.
        if done && seen == newest {
            break;
        }
    }
}

/// Periods missed before a wake whose deadline is `gap` after the last one taken: wakes that
/// arrived while the woken thread was not running (it takes the newest), and periods the waker
/// slept through (no wake was made for them). Their samples would have been `lat` plus a whole
/// number of intervals: as a timer thread's missed periods, they count in the corrected
/// statistics at those values.
#[cold]
fn missed_before(ctx: &Ctx, sink: &mut WindowSink, lat: u64, gap: u64) {
    let missed = gap / ctx.interval - 1;
    sink.cur
        .add_stall(lat + (missed + 1) * ctx.interval, missed, 0);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::{Lapped, STAMPS, WakeSlot};
    use latlab_model::Method;
    use std::sync::atomic::Ordering;

    /// A slot whose wakes 1..=`stamps.len()` were stamped so, their deadlines 10 × the wake.
    fn slot_with(stamps: &[u64]) -> WakeSlot {
        let slot = WakeSlot::new(Method::Futex).unwrap();
        for (i, &t) in stamps.iter().enumerate() {
            let wake = i as u32 + 1;
            let (stamp, at) = &slot.stamps[(wake % STAMPS) as usize];
            stamp.store(t, Ordering::Relaxed);
            at.store(u64::from(wake) * 10, Ordering::Relaxed);
        }
        slot.seq.store(stamps.len() as u32, Ordering::Relaxed);
        slot
    }

    fn newest(slot: &WakeSlot, seen: u32, now: u64) -> Result<Option<(u32, u64, u64)>, Lapped> {
        let n = slot.seq.load(Ordering::Relaxed);
        slot.newest_before(seen, n, now)
    }

    /// The woken thread reads its clock, then which wake is the newest: a wake published in
    /// between is not the one that woke it, and taking its stamp gave latencies of 0.
    #[test]
    fn a_wake_published_after_the_clock_reading_is_left_for_the_next_turn() {
        let slot = slot_with(&[100, 200, 300, 400, 500]);
        // Woken by wake 4 at 450; wake 5 was published at 500, after that reading.
        assert!(matches!(newest(&slot, 3, 450), Ok(Some((4, 400, 40)))));
        // Read at 550: wake 5 is the newest before it, wake 4 is coalesced with it.
        assert!(matches!(newest(&slot, 3, 550), Ok(Some((5, 500, 50)))));
        // Every wake after the last seen is later than the reading: nothing woke the thread.
        assert!(matches!(newest(&slot, 4, 450), Ok(None)));
        assert!(matches!(newest(&slot, 5, 999), Ok(None)));
    }

    /// Stamps far behind the newest may be overwritten: the thread reads its clock again.
    #[test]
    fn stamps_the_waker_may_have_overwritten_are_not_taken() {
        let stamps: Vec<u64> = (1..=12).map(|w| w * 100).collect();
        let slot = slot_with(&stamps);
        // The newest stamps are all later than a reading taken before wake 5 was published.
        assert!(matches!(newest(&slot, 0, 450), Err(Lapped)));
        // One close to the newest is taken.
        assert!(matches!(newest(&slot, 0, 1150), Ok(Some((11, 1100, 110)))));
        // The waker moved on while the stamp was read: not taken.
        let n = slot.seq.load(Ordering::Relaxed);
        slot.seq.store(n + STAMPS - 1, Ordering::Relaxed);
        assert!(matches!(slot.newest_before(0, n, 1150), Err(Lapped)));
    }

    /// The final wake carries no sample, and `done` implies it is counted in `seq`.
    #[test]
    fn the_final_wake_is_never_a_sample() {
        let slot = slot_with(&[100, 200]);
        slot.finish();
        assert!(slot.done.load(Ordering::Acquire));
        let seq = slot.seq.load(Ordering::Acquire);
        assert_eq!(seq, 3);
        // Counted as a wake it would still not be taken: its stamp is later than any reading.
        assert!(matches!(slot.newest_before(2, seq, u64::MAX - 1), Ok(None)));
        assert!(matches!(
            slot.newest_before(0, seq - 1, 250),
            Ok(Some((2, 200, 20)))
        ));
    }
}
