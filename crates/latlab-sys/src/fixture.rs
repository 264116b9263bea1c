//! Fixture trees for tests: a fake MSR device file, and a snapshot of everything under a root to
//! show that a change was undone byte for byte (copies of the trees: `latlab-testkit`).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// Write a fake `/dev/cpu/<cpu>/msr` under `root`: a regular file of zeros, long enough for the
/// register (`msr + 8` bytes, at least 0x40), holding `value` at offset `msr`, little endian as
/// the msr device returns it. Rewriting it changes only that register.
pub fn write_msr(root: &Path, cpu: u32, msr: u64, value: u64) -> io::Result<()> {
    let path = root.join(format!("dev/cpu/{cpu}/msr"));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let at = usize::try_from(msr).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut bytes = std::fs::read(&path).unwrap_or_default();
    bytes.resize(bytes.len().max(at + 8).max(0x40), 0);
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    std::fs::write(&path, bytes)
}

/// One path of a [`snapshot`]: its kind, mode and content (a symlink by its target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir(u32),
    File(u32, Vec<u8>),
    Link(PathBuf),
}

/// Every path under `root`, relative to it, with its [`Entry`].
pub fn snapshot(root: &Path) -> io::Result<BTreeMap<PathBuf, Entry>> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir)? {
            let p = e?.path();
            let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
            let md = std::fs::symlink_metadata(&p)?;
            let mode = md.permissions().mode();
            let entry = if md.file_type().is_symlink() {
                Entry::Link(std::fs::read_link(&p)?)
            } else if md.is_dir() {
                stack.push(p.clone());
                Entry::Dir(mode)
            } else {
                Entry::File(mode, std::fs::read(&p)?)
            };
            out.insert(rel, entry);
        }
    }
    Ok(out)
}

/// The paths whose entries differ between two snapshots (present in one only, or changed).
pub fn differences<'a>(
    a: &'a BTreeMap<PathBuf, Entry>,
    b: &'a BTreeMap<PathBuf, Entry>,
) -> Vec<&'a Path> {
    let mut out: Vec<&Path> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .map(PathBuf::as_path)
        .collect();
    out.dedup();
    out
}
