//! Stories for spikes seen by measuring threads, told while the ring still holds them.
//!
//! A CPU's ring keeps its last 4096 events: a few hundred milliseconds to a few seconds of
//! history, depending on how busy the CPU is. A measuring thread cannot afford to copy the ring
//! itself, and a coordinator that looks at spikes once per window may be too late. So the
//! measuring thread hands `(tag, cpu, from, to)` to a [`StorySender`] — non-blocking,
//! allocation-free — and the [`StoryCollector`]'s thread reads the ring at once and keeps the
//! story under the caller's tag.

use crate::tracer::RingReader;
use latlab_model::trace::SpikeStory;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

struct Request {
    tag: u64,
    cpu: u32,
    from_ns: u64,
    to_ns: u64,
}

/// The story of one spike, with the tag its requester gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaggedStory {
    pub tag: u64,
    pub story: SpikeStory,
}

/// What a collector produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// In the order they were requested.
    pub stories: Vec<TaggedStory>,
    /// Requests not served: the queue was full, or the ring could not be read.
    pub missed: u64,
}

/// The requesting end: clone one into every measuring thread.
#[derive(Clone)]
pub struct StorySender {
    tx: SyncSender<Request>,
    missed: Arc<AtomicU64>,
}

impl StorySender {
    /// Ask for the story of `cpu` between `from_ns` and `to_ns` (`CLOCK_MONOTONIC`; for a timer
    /// spike: the deadline and the time the thread woke). Never blocks and never allocates;
    /// returns false, and counts a miss, when the queue is full.
    pub fn request(&self, tag: u64, cpu: u32, from_ns: u64, to_ns: u64) -> bool {
        match self.tx.try_send(Request {
            tag,
            cpu,
            from_ns,
            to_ns,
        }) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.missed.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }
}

/// The thread that reads rings and tells stories.
pub struct StoryCollector {
    stop: Arc<AtomicBool>,
    missed: Arc<AtomicU64>,
    thread: Option<JoinHandle<Vec<TaggedStory>>>,
}

fn serve(
    reader: RingReader,
    rx: Receiver<Request>,
    stop: Arc<AtomicBool>,
    missed: Arc<AtomicU64>,
) -> Vec<TaggedStory> {
    let mut out = Vec::new();
    let tell =
        |r: Request, out: &mut Vec<TaggedStory>| match reader.story(r.cpu, r.from_ns, r.to_ns) {
            Ok(story) => out.push(TaggedStory { tag: r.tag, story }),
            Err(_) => {
                missed.fetch_add(1, Ordering::Relaxed);
            }
        };
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(r) => tell(r, &mut out),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if stop.load(Ordering::Relaxed) {
            while let Ok(r) = rx.try_recv() {
                tell(r, &mut out);
            }
            break;
        }
    }
    out
}

impl StoryCollector {
    /// Start the collector thread, kept on `cpus` (off the measured CPUs; none: anywhere), with
    /// room for `queue` pending requests.
    pub fn start(
        reader: RingReader,
        queue: usize,
        cpus: Vec<u32>,
    ) -> std::io::Result<(StoryCollector, StorySender)> {
        let (tx, rx) = sync_channel(queue.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let missed = Arc::new(AtomicU64::new(0));
        let (s, m) = (stop.clone(), missed.clone());
        let thread = std::thread::Builder::new()
            .name("latlab-stories".into())
            .spawn(move || {
                latlab_sys::thread::keep_on(&cpus);
                serve(reader, rx, s, m)
            })?;
        Ok((
            StoryCollector {
                stop,
                missed: missed.clone(),
                thread: Some(thread),
            },
            StorySender { tx, missed },
        ))
    }

    /// Serve the requests still queued, stop, and return the stories.
    pub fn finish(mut self) -> Collected {
        self.stop.store(true, Ordering::Relaxed);
        let stories = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        Collected {
            stories,
            missed: self.missed.load(Ordering::Relaxed),
        }
    }
}

impl Drop for StoryCollector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
