//! The registry: every load generator describes itself in one [`LoadDescriptor`] (name, what it
//! does, options with defaults and ranges, what it reports, whether it can run here), and this
//! list is the one place they are gathered.

use crate::loads;
use crate::spec::{LoadSpec, OptionDesc};
use crate::{Ctx, LoadOptions, Running};
use std::fmt;

/// A check between a spec's options (pure); `Err` names the problem.
pub type ValidateFn = fn(&LoadSpec) -> Result<(), String>;
/// Whether a load can run here with these options; `Err` says why not.
pub type SupportedFn = fn(&LoadSpec, &LoadOptions) -> Result<(), String>;
/// The highest real-time priority a load's threads take (`SCHED_FIFO`/`SCHED_RR`, 1 to 99).
pub type RealtimeFn = fn(&LoadSpec) -> i32;
pub(crate) type StartFn = fn(&LoadSpec, &Ctx<'_>) -> Result<Box<dyn Running>, String>;

/// One load generator, as the registry knows it.
pub struct LoadDescriptor {
    /// The kind, as written in a spec: `cpu`, `io`, `rt-hog`, ...
    pub name: &'static str,
    /// One line: what it does and what it stresses.
    pub description: &'static str,
    /// The options it accepts, with types, ranges and defaults.
    pub options: &'static [OptionDesc],
    /// What it reports at its end, as `(what is counted, unit)` pairs.
    pub throughput: &'static [(&'static str, &'static str)],
    /// The rest of the spec after `kind:` is a command line rather than options (`cmd`).
    pub takes_command: bool,
    /// Checks between options, run when a spec is parsed (pure).
    pub validate: Option<ValidateFn>,
    /// For a load that runs real-time threads: the highest priority they take. A thread that
    /// must keep time beside the load (the one that ends it) runs there.
    pub realtime: Option<RealtimeFn>,
    /// Whether the load can run on this system with these options; `Err` says why not.
    pub supported: SupportedFn,
    pub(crate) start: StartFn,
}

impl fmt::Debug for LoadDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadDescriptor")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

static REGISTRY: [&LoadDescriptor; 8] = [
    &loads::cpu::DESCRIPTOR,
    &loads::matrix::DESCRIPTOR,
    &loads::memory::DESCRIPTOR,
    &loads::io::DESCRIPTOR,
    &loads::procfs::DESCRIPTOR,
    &loads::rt_hog::DESCRIPTOR,
    &loads::messaging::DESCRIPTOR,
    &loads::cmd::DESCRIPTOR,
];

/// Every load generator, in the order `latlab load --list` shows them.
pub fn registry() -> &'static [&'static LoadDescriptor] {
    &REGISTRY
}

/// The generator of a kind.
pub fn lookup(kind: &str) -> Option<&'static LoadDescriptor> {
    REGISTRY.iter().copied().find(|d| d.name == kind)
}

/// Every kind's name.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|d| d.name).collect()
}

/// The registry as text: per kind its description, what it reports and its options.
pub fn list_text() -> String {
    let mut out = String::new();
    for d in REGISTRY {
        out.push_str(&format!("{}\n  {}\n", d.name, d.description));
        if d.throughput.is_empty() {
            out.push_str("  reports: elapsed time and exit status\n");
        } else {
            let t: Vec<_> = d
                .throughput
                .iter()
                .map(|(what, unit)| format!("{unit} ({what})"))
                .collect();
            out.push_str(&format!("  reports: {}\n", t.join(", ")));
        }
        if d.takes_command {
            out.push_str("  usage:   cmd:COMMAND  (the rest of the spec, run with /bin/sh -c)\n");
        }
        for o in d.options {
            out.push_str(&format!(
                "  {:<10} {:<22} default {:<28} {}\n",
                o.name,
                o.accepted(),
                o.default_text(),
                o.help
            ));
        }
        out.push('\n');
    }
    out.push_str(
        "Spec: KIND[:OPTION=VALUE,...], e.g. cpu:workers=2,kind=float or io:bs=1M,fsync=true.\n\
         Sizes take k, M, G suffixes (powers of 1024); MB/s counts 10^6 bytes.\n",
    );
    out
}
