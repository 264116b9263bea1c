//! Worker threads shared by the thread-based loads: each worker is pinned to one CPU of the set
//! (in turn), prepares itself, says it is ready, waits until every worker is, then works until a
//! shared stop flag is set and returns its counts. Dropping a pool stops and joins every worker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One worker of a load.
pub(crate) trait Worker: Send + 'static {
    /// Runs on the worker's thread after pinning and before the load counts as started; an error
    /// fails the start of the whole load.
    fn setup(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// Work until `stop` is set, checking it often (well under a millisecond apart where the
    /// work allows), and return the counts (one per entry of the load's throughput list).
    fn run(&mut self, stop: &AtomicBool) -> Vec<u64>;

    /// Anything that went wrong while running (reported, not fatal).
    fn warning(&self) -> Option<String> {
        None
    }

    /// Whether the worker moves to its CPU after it is ready: one whose setup takes a
    /// real-time policy would, moved there first at normal priority, wait for the CPU the
    /// workers before it already took (a second for ten real-time hogs).
    fn pins_after_ready(&self) -> bool {
        false
    }
}

struct WorkerEnd {
    counts: Vec<u64>,
    warning: Option<String>,
    began: Instant,
    ended: Instant,
}

/// What a pool's workers did, summed.
#[derive(Debug, Clone, Default)]
pub(crate) struct PoolEnd {
    pub workers: usize,
    pub counts: Vec<u64>,
    /// From the first worker's start of work to the last one's end.
    pub elapsed: Duration,
    pub warnings: Vec<String>,
}

pub(crate) struct Pool {
    stop: Arc<AtomicBool>,
    gate: Arc<Gate>,
    handles: Vec<JoinHandle<Option<WorkerEnd>>>,
    /// When the pool was first asked to stop: its work counts until then.
    asked: std::sync::OnceLock<Instant>,
}

/// Workers that take longer than this to stop once asked are said to: thousands of threads on a
/// few CPUs each wait for their turn to see the request.
const SLOW_STOP: Duration = Duration::from_secs(2);

/// Holds every worker between its set-up and its work until all are set up: a worker that took a
/// real-time policy and began spinning would keep the ones after it (still at normal priority)
/// from setting up, for as long as the kernel's RT throttling lets it (a second).
#[derive(Default)]
struct Gate {
    /// `None` while set-up goes on; then whether the work begins.
    open: Mutex<Option<bool>>,
    cv: Condvar,
}

impl Gate {
    /// Open it (`go`: the work begins) or give up; the first call decides.
    fn open(&self, go: bool) {
        if let Ok(mut open) = self.open.lock() {
            open.get_or_insert(go);
        }
        self.cv.notify_all();
    }

    /// Wait for the decision: whether to work.
    fn wait(&self) -> bool {
        let Ok(mut open) = self.open.lock() else {
            return false;
        };
        loop {
            if let Some(go) = *open {
                return go;
            }
            match self.cv.wait(open) {
                Ok(g) => open = g,
                Err(_) => return false,
            }
        }
    }
}

impl Pool {
    /// Start one thread per worker, named `ll-{tag}-{i}`, worker `i` pinned to
    /// `cpus[i % cpus.len()]`. Returns once every worker is set up; if any fails, the others are
    /// stopped and joined and the first error is returned.
    pub fn start(
        tag: &str,
        cpus: &[u32],
        workers: Vec<Box<dyn Worker>>,
        stop: Arc<AtomicBool>,
    ) -> Result<Pool, String> {
        let mut pool = Pool {
            stop,
            gate: Arc::default(),
            handles: Vec::with_capacity(workers.len()),
            asked: std::sync::OnceLock::new(),
        };
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let n = workers.len();
        for (i, mut worker) in workers.into_iter().enumerate() {
            let cpu = cpus.get(i % cpus.len().max(1)).copied();
            let (stop, gate) = (pool.stop.clone(), pool.gate.clone());
            let ready = ready_tx.clone();
            let name: String = format!("ll-{tag}-{i}").chars().take(15).collect();
            let spawned = std::thread::Builder::new().name(name).spawn(move || {
                // Loads run at normal priority whatever the starting thread's policy is.
                let _ = latlab_sys::thread::set_scheduler(libc::SCHED_OTHER, 0);
                let pin = || match cpu {
                    Some(c) => latlab_sys::thread::set_affinity(&[c])
                        .map_err(|e| format!("pinning a worker to CPU {c}: {e}")),
                    None => Ok(()),
                };
                let late = worker.pins_after_ready();
                // One pinned late is checked now: a CPU it may not use fails the start, as
                // pinning first would.
                let may_use = || match (cpu, latlab_sys::thread::process_affinity()) {
                    (Some(c), Ok(allowed)) if !allowed.contains(&c) => Err(format!(
                        "pinning a worker to CPU {c}: not among the CPUs this process may use \
                         ({})",
                        latlab_model::units::CpuList::from_cpus(allowed)
                    )),
                    _ => Ok(()),
                };
                let prepared = if late { may_use() } else { pin() }.and_then(|()| worker.setup());
                let failed = prepared.is_err();
                let _ = ready.send(prepared);
                drop(ready);
                if failed || !gate.wait() {
                    return None;
                }
                // Never run anywhere else: a worker its CPU refuses does no work.
                if late && let Err(e) = pin() {
                    let now = Instant::now();
                    return Some(WorkerEnd {
                        counts: Vec::new(),
                        warning: Some(e),
                        began: now,
                        ended: now,
                    });
                }
                let began = Instant::now();
                let counts = worker.run(&stop);
                let ended = Instant::now();
                let warning = worker.warning();
                drop(worker);
                Some(WorkerEnd {
                    counts,
                    warning,
                    began,
                    ended,
                })
            });
            match spawned {
                Ok(h) => pool.handles.push(h),
                Err(e) => return Err(format!("starting worker thread {i} of {n}: {e}")),
            }
        }
        drop(ready_tx);
        let mut first_error = None;
        for _ in 0..n {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert_with(|| "a worker ended while starting".into());
                    break;
                }
            }
        }
        pool.gate.open(first_error.is_none());
        match first_error {
            Some(e) => Err(e),
            None => Ok(pool),
        }
    }

    pub fn request_stop(&self) {
        let _ = self.asked.set(Instant::now());
        self.stop.store(true, Ordering::Relaxed);
        // Workers still held at the gate (a start that failed) end without working.
        self.gate.open(false);
    }

    /// Stop (if not yet asked), join every worker and sum what they counted.
    pub fn join(mut self) -> PoolEnd {
        self.request_stop();
        let mut end = PoolEnd {
            workers: self.handles.len(),
            ..PoolEnd::default()
        };
        let mut began: Option<Instant> = None;
        let mut ended: Option<Instant> = None;
        for h in self.handles.drain(..) {
            match h.join() {
                Ok(Some(w)) => {
                    if end.counts.len() < w.counts.len() {
                        end.counts.resize(w.counts.len(), 0);
                    }
                    for (sum, c) in end.counts.iter_mut().zip(&w.counts) {
                        *sum = sum.saturating_add(*c);
                    }
                    if let Some(warning) = w.warning
                        && !end.warnings.contains(&warning)
                    {
                        end.warnings.push(warning);
                    }
                    began = Some(began.map_or(w.began, |b| b.min(w.began)));
                    ended = Some(ended.map_or(w.ended, |e| e.max(w.ended)));
                }
                Ok(None) => {}
                Err(_) => end.warnings.push("a worker thread panicked".into()),
            }
        }
        if let (Some(b), Some(e)) = (began, ended) {
            // Its time runs until it was asked to stop (or its last worker ended before): the
            // wait for thousands of workers to see the request is not work to count rates over.
            let asked = self.asked.get().copied().unwrap_or(e);
            end.elapsed = e.min(asked).saturating_duration_since(b);
            let stopping = e.saturating_duration_since(asked);
            if stopping > SLOW_STOP {
                end.warnings.push(format!(
                    "its {} took {} to stop once asked (more threads than the CPUs run at once): \
                     it loaded the system that much longer, and its rates count its time until \
                     it was asked",
                    latlab_model::units::plural(end.workers as u64, "worker", "workers"),
                    latlab_model::units::format_elapsed(
                        u64::try_from(stopping.as_nanos()).unwrap_or(u64::MAX)
                    )
                ));
            }
        }
        end
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.request_stop();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Counts its turns; pinned after it is ready, or before.
    struct Counter {
        late: bool,
    }

    impl Worker for Counter {
        fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            vec![n]
        }

        fn pins_after_ready(&self) -> bool {
            self.late
        }
    }

    /// Sets itself up in its turn (the later ones slower) and notes when it did and when it
    /// began to work.
    struct Noted {
        turn: u64,
        times: Arc<Mutex<Vec<(Instant, Instant)>>>,
        set_up: Option<Instant>,
    }

    impl Worker for Noted {
        fn setup(&mut self) -> Result<(), String> {
            std::thread::sleep(Duration::from_millis(5 * self.turn));
            self.set_up = Some(Instant::now());
            Ok(())
        }

        fn run(&mut self, _stop: &AtomicBool) -> Vec<u64> {
            let began = Instant::now();
            if let (Some(set_up), Ok(mut t)) = (self.set_up, self.times.lock()) {
                t.push((set_up, began));
            }
            vec![1]
        }
    }

    /// Works until asked to stop, then takes `lag` more before it ends (as one of thousands of
    /// threads waiting for a CPU to see the request does).
    struct Late {
        lag: Duration,
    }

    impl Worker for Late {
        fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(self.lag);
            vec![1]
        }
    }

    /// A pool's time runs until it is asked to stop, and a slow stop is said: the workers that
    /// took 23 s to stop after a 1 s run had their rate counted over the 23 s, unsaid.
    #[test]
    fn a_slow_stop_is_said_and_not_counted_as_work() {
        let here = latlab_sys::Sys::default().online_cpus().unwrap();
        let lag = SLOW_STOP + Duration::from_millis(300);
        let pool = Pool::start(
            "t",
            here.cpus(),
            vec![Box::new(Late { lag }) as Box<dyn Worker>],
            Arc::default(),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let end = pool.join();
        assert!(end.elapsed < lag, "{:?} counts the stop", end.elapsed);
        // The 200 ms it ran, less the moment its workers took to start (its time begins when
        // they do).
        assert!(
            end.elapsed >= Duration::from_millis(150),
            "{:?}",
            end.elapsed
        );
        assert_eq!(end.warnings.len(), 1, "{:?}", end.warnings);
        assert!(
            end.warnings[0].starts_with("its 1 worker took 2."),
            "{:?}",
            end.warnings
        );
        // A prompt stop says nothing.
        let pool = Pool::start(
            "t",
            here.cpus(),
            vec![Box::new(Late {
                lag: Duration::ZERO,
            }) as Box<dyn Worker>],
            Arc::default(),
        )
        .unwrap();
        assert!(pool.join().warnings.is_empty());
    }

    /// No worker begins its work before every worker is set up: a real-time one spinning early
    /// would keep the later ones from setting up.
    #[test]
    fn workers_begin_together_once_all_are_set_up() {
        let times = Arc::new(Mutex::new(Vec::new()));
        let workers = (0..4)
            .map(|turn| {
                Box::new(Noted {
                    turn,
                    times: times.clone(),
                    set_up: None,
                }) as Box<dyn Worker>
            })
            .collect();
        let here = latlab_sys::Sys::default().online_cpus().unwrap();
        let pool = Pool::start("t", here.cpus(), workers, Arc::default()).unwrap();
        let end = pool.join();
        assert_eq!(end.counts, [4]);
        let times = times.lock().unwrap();
        assert_eq!(times.len(), 4);
        let last_set_up = times.iter().map(|t| t.0).max().unwrap();
        for (_, began) in times.iter() {
            assert!(
                *began >= last_set_up,
                "a worker began before the last was set up"
            );
        }
    }

    /// A start that fails lets the workers already set up go without working.
    #[test]
    fn a_failed_start_releases_the_workers_held_at_the_gate() {
        struct Refuses;
        impl Worker for Refuses {
            fn setup(&mut self) -> Result<(), String> {
                std::thread::sleep(Duration::from_millis(20));
                Err("refused".into())
            }
            fn run(&mut self, _stop: &AtomicBool) -> Vec<u64> {
                vec![]
            }
        }
        let times = Arc::new(Mutex::new(Vec::new()));
        let workers = vec![
            Box::new(Noted {
                turn: 0,
                times: times.clone(),
                set_up: None,
            }) as Box<dyn Worker>,
            Box::new(Refuses),
        ];
        let here = latlab_sys::Sys::default().online_cpus().unwrap();
        let Err(e) = Pool::start("t", here.cpus(), workers, Arc::default()) else {
            panic!("a refused set-up started the pool")
        };
        assert_eq!(e, "refused");
        assert!(times.lock().unwrap().is_empty(), "a held worker worked");
    }

    /// A worker that moves to its CPU after it is ready is checked against the CPUs it may use
    /// before: an absent one fails the start, as for one pinned first. On its CPU, it works.
    #[test]
    fn a_worker_pinned_late_works_on_its_cpu_or_not_at_all() {
        let absent = [4095];
        let start = |late| {
            Pool::start(
                "t",
                &absent,
                vec![Box::new(Counter { late }) as Box<dyn Worker>],
                Arc::new(AtomicBool::new(false)),
            )
        };
        // A CPU it may not use fails the start, pinned late or first.
        for late in [true, false] {
            let Err(e) = start(late) else {
                panic!("pinned to an absent CPU (late: {late})")
            };
            assert!(e.starts_with("pinning a worker to CPU 4095"), "{e}");
        }
        // On a CPU that takes it, it works.
        let here = latlab_sys::Sys::default().online_cpus().unwrap();
        let pool = Pool::start(
            "t",
            &here.cpus()[..1],
            vec![Box::new(Counter { late: true }) as Box<dyn Worker>],
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let end = pool.join();
        assert!(end.counts[0] > 0 && end.warnings.is_empty(), "{end:?}");
    }
}
