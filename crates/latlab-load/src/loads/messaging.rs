//! `messaging`: hackbench-like groups of sender and receiver threads; in each group every
//! sender sends fixed-size messages to every receiver in turn, over pipes or Unix stream
//! sockets (scheduler wake-ups, cross-CPU migrations, IPIs).

use crate::pool::{Pool, Worker};
use crate::registry::LoadDescriptor;
use crate::spec::{OptDefault, OptKind, OptionDesc};
use crate::{Ctx, Finished, LoadSpec, Running, os};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub static DESCRIPTOR: LoadDescriptor = LoadDescriptor {
    name: "messaging",
    description: "hackbench-like groups of senders and receivers passing messages over pipes or \
                  Unix sockets (wake-ups, migrations)",
    options: &[
        OptionDesc {
            name: "groups",
            kind: OptKind::Count { min: 1, max: 64 },
            default: OptDefault::Value("1"),
            help: "groups of senders and receivers",
        },
        OptionDesc {
            name: "pairs",
            kind: OptKind::Count { min: 1, max: 64 },
            default: OptDefault::Value("4"),
            help: "senders and as many receivers per group (threads: 2 × groups × pairs)",
        },
        OptionDesc {
            name: "size",
            kind: OptKind::Size { min: 1, max: 4096 },
            default: OptDefault::Value("100"),
            help: "bytes per message",
        },
        OptionDesc {
            name: "transport",
            kind: OptKind::Choice(&["pipe", "socket"]),
            default: OptDefault::Value("pipe"),
            help: "pipes or Unix stream socket pairs",
        },
    ],
    throughput: &[
        ("messages delivered", "messages/s"),
        ("bytes delivered", "MB/s"),
    ],
    takes_command: false,
    validate: None,
    realtime: None,
    supported: super::always,
    start,
};

/// How long a blocked sender or receiver waits before looking at the stop flag again.
const POLL_MS: libc::c_int = 10;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A non-blocking channel: (read end, write end).
fn channel(socket: bool) -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two descriptors for the kernel to fill.
    let ret = unsafe {
        if socket {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        } else {
            libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC)
        }
    };
    if ret == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

struct Sender {
    targets: Vec<Arc<OwnedFd>>,
    size: usize,
    socket: bool,
    failure: Option<String>,
}

impl Worker for Sender {
    fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
        let msg = vec![0xa5u8; self.size];
        'work: loop {
            for fd in &self.targets {
                let fd = fd.as_raw_fd();
                let mut off = 0;
                while off < msg.len() {
                    if stop.load(Ordering::Relaxed) {
                        break 'work;
                    }
                    let rest = &msg[off..];
                    // SAFETY: rest is valid for rest.len() bytes; fd is open for the pool's life.
                    let n = unsafe {
                        if self.socket {
                            libc::send(fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL)
                        } else {
                            libc::write(fd, rest.as_ptr().cast(), rest.len())
                        }
                    };
                    if n > 0 {
                        off += n as usize;
                    } else if n == -1 && matches!(errno(), libc::EAGAIN | libc::EINTR) {
                        os::poll_one(fd, libc::POLLOUT, POLL_MS);
                    } else {
                        self.failure = Some(format!(
                            "sending: {}",
                            std::io::Error::from_raw_os_error(errno())
                        ));
                        break 'work;
                    }
                }
            }
        }
        vec![0, 0]
    }

    fn warning(&self) -> Option<String> {
        self.failure.clone()
    }
}

struct Receiver {
    source: Arc<OwnedFd>,
    failure: Option<String>,
}

impl Worker for Receiver {
    fn run(&mut self, stop: &AtomicBool) -> Vec<u64> {
        let mut buf = vec![0u8; 64 * 1024];
        let fd = self.source.as_raw_fd();
        let mut bytes = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: buf is valid for buf.len() bytes; fd is open for the pool's life.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                bytes += n as u64;
            } else if n == -1 && matches!(errno(), libc::EAGAIN | libc::EINTR) {
                os::poll_one(fd, libc::POLLIN, POLL_MS);
            } else {
                if n == -1 {
                    self.failure = Some(format!(
                        "receiving: {}",
                        std::io::Error::from_raw_os_error(errno())
                    ));
                }
                break;
            }
        }
        // Messages and bytes are both counted from the bytes received.
        vec![bytes, bytes]
    }

    fn warning(&self) -> Option<String> {
        self.failure.clone()
    }
}

struct Messaging {
    pool: Pool,
    size: usize,
    /// Every descriptor stays open until every worker has ended: no sender ever writes to a
    /// channel whose reader is gone.
    _fds: Vec<Arc<OwnedFd>>,
}

impl Running for Messaging {
    fn request_stop(&self) {
        self.pool.request_stop();
    }

    fn finish(self: Box<Self>) -> Finished {
        let Messaging { pool, size, _fds } = *self;
        let end = pool.join();
        drop(_fds);
        super::finished(
            end,
            &[
                ("messages delivered", "messages/s", 1.0 / size as f64),
                ("bytes delivered", "MB/s", 1e-6),
            ],
        )
    }
}

fn start(spec: &LoadSpec, ctx: &Ctx<'_>) -> Result<Box<dyn Running>, String> {
    let groups = spec.count("groups").unwrap_or(1) as usize;
    let pairs = spec.count("pairs").unwrap_or(4) as usize;
    let size = spec.size("size").unwrap_or(100) as usize;
    let socket = spec.choice("transport") == Some("socket");
    let mut fds = Vec::new();
    let mut workers: Vec<Box<dyn Worker>> = Vec::with_capacity(groups * pairs * 2);
    for _ in 0..groups {
        let mut writers = Vec::with_capacity(pairs);
        for _ in 0..pairs {
            let (r, w) = channel(socket).map_err(|e| {
                format!(
                    "creating a {}: {e}",
                    if socket { "socket pair" } else { "pipe" }
                )
            })?;
            let (r, w) = (Arc::new(r), Arc::new(w));
            fds.push(r.clone());
            fds.push(w.clone());
            writers.push(w);
            workers.push(Box::new(Receiver {
                source: r,
                failure: None,
            }));
        }
        for s in 0..pairs {
            // Each sender starts at a different receiver.
            let targets = (0..pairs)
                .map(|k| writers[(s + k) % pairs].clone())
                .collect();
            workers.push(Box::new(Sender {
                targets,
                size,
                socket,
                failure: None,
            }));
        }
    }
    let pool = Pool::start("msg", ctx.cpus, workers, Arc::new(AtomicBool::new(false)))?;
    Ok(Box::new(Messaging {
        pool,
        size,
        _fds: fds,
    }))
}
