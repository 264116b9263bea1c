//! Load specs: `KIND[:OPTION=VALUE,...]`, parsed once into checked values (no system access).
//!
//! Grammar:
//!
//! ```text
//! spec    = kind [ ":" options ]          e.g. cpu, cpu:workers=2,kind=float, io:bs=1M,fsync=true
//! options = option { "," option }
//! option  = name "=" value
//! cmd     = "cmd:" command-line           the rest of the spec, run with /bin/sh -c
//! ```
//!
//! Every option has a type: a count (`workers=4`), a size in bytes with an optional binary suffix
//! (`4k` = 4096, `1M`, `256M`, `2G`), a duration with a unit (`2s`, `500ms`), a boolean
//! (`true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`), one of a list of words, or a path. Unknown
//! kinds, unknown options, repeated options and values out of range are rejected with one line
//! naming the problem and the accepted form.

use crate::LoadError;
use crate::registry::{self, LoadDescriptor};
use latlab_model::units::parse_duration;
use std::fmt;
use std::path::PathBuf;

/// The accepted form of a spec, for error messages.
pub const SPEC_FORM: &str = "KIND[:OPTION=VALUE,...] or cmd:COMMAND; see `latlab load --list`";
const SIZE_FORM: &str =
    "a byte count with an optional k, M, G or T suffix (powers of 1024), e.g. 512, 4k, 1M, 256M";
const BOOL_FORM: &str = "true or false (also yes/no, on/off, 1/0)";

/// The type and range of an option's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptKind {
    /// A whole number in `min..=max`.
    Count { min: u64, max: u64 },
    /// A size in bytes in `min..=max` (`4k`, `1M`).
    Size { min: u64, max: u64 },
    /// A duration in nanoseconds in `min..=max` (`2s`, `500ms`).
    Duration { min: u64, max: u64 },
    /// `true` or `false`.
    Bool,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A file-system path.
    Path,
}

/// The default of an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptDefault {
    /// This value, written as the user would write it.
    Value(&'static str),
    /// One per CPU of the load's CPU set.
    OnePerCpu,
    /// A fresh temporary directory under the system's temporary directory, removed after.
    FreshTempDir,
}

/// One option a load accepts.
#[derive(Debug, Clone, Copy)]
pub struct OptionDesc {
    pub name: &'static str,
    pub kind: OptKind,
    pub default: OptDefault,
    pub help: &'static str,
}

impl OptionDesc {
    /// The accepted values, e.g. `1 to 1024`, `int|float|both`.
    pub fn accepted(&self) -> String {
        use latlab_model::units::format_duration;
        match self.kind {
            OptKind::Count { min, max } => format!("{min} to {max}"),
            OptKind::Size { min, max } => format!("{} to {}", format_size(min), format_size(max)),
            OptKind::Duration { min, max } => {
                format!("{} to {}", format_duration(min), format_duration(max))
            }
            OptKind::Bool => "true|false".into(),
            OptKind::Choice(words) => words.join("|"),
            OptKind::Path => "a directory".into(),
        }
    }

    /// The default as text, e.g. `4k`, `one per CPU`.
    pub fn default_text(&self) -> &'static str {
        match self.default {
            OptDefault::Value(v) => v,
            OptDefault::OnePerCpu => "one per CPU",
            OptDefault::FreshTempDir => "a fresh temporary directory",
        }
    }
}

/// A checked option value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptValue {
    Count(u64),
    /// Bytes.
    Size(u64),
    /// Nanoseconds.
    Duration(u64),
    Bool(bool),
    Choice(&'static str),
    Path(PathBuf),
}

impl fmt::Display for OptValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptValue::Count(n) => write!(f, "{n}"),
            OptValue::Size(b) => f.write_str(&format_size(*b)),
            OptValue::Duration(ns) => f.write_str(&latlab_model::units::format_duration(*ns)),
            OptValue::Bool(b) => write!(f, "{b}"),
            OptValue::Choice(w) => f.write_str(w),
            OptValue::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// One load as the user asked for it: its kind and every option with a value (given or default).
#[derive(Debug, Clone)]
pub struct LoadSpec {
    text: String,
    descriptor: &'static LoadDescriptor,
    /// Every option of the kind whose default is a value or that was given.
    values: Vec<(&'static str, OptValue)>,
    /// Names of the options the user gave.
    given: Vec<&'static str>,
    command: Option<String>,
}

impl PartialEq for LoadSpec {
    fn eq(&self, other: &Self) -> bool {
        self.descriptor.name == other.descriptor.name
            && self.values == other.values
            && self.command == other.command
    }
}

impl fmt::Display for LoadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for LoadSpec {
    type Err = LoadError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LoadSpec::parse(s)
    }
}

impl LoadSpec {
    /// Parse `KIND[:OPTION=VALUE,...]` or `cmd:COMMAND`. Pure: nothing on the system is read.
    pub fn parse(text: &str) -> Result<LoadSpec, LoadError> {
        let t = text.trim();
        let bad = |problem: String| {
            LoadError::Invalid(format!(
                "load spec {t:?}: {problem} (accepted: {SPEC_FORM})"
            ))
        };
        if t.is_empty() {
            return Err(LoadError::Invalid(format!(
                "empty load spec (accepted: {SPEC_FORM})"
            )));
        }
        let (kind, rest) = match t.split_once(':') {
            Some((k, r)) => (k.trim(), Some(r)),
            None => (t, None),
        };
        let Some(descriptor) = registry::lookup(kind) else {
            let hint = if kind == "idle" {
                "; idle is a phase of a schedule only"
            } else {
                ""
            };
            return Err(LoadError::Invalid(format!(
                "unknown load kind {kind:?}{hint} (accepted: {})",
                registry::names().join(", ")
            )));
        };
        let mut spec = LoadSpec {
            text: t.to_string(),
            descriptor,
            values: Vec::new(),
            given: Vec::new(),
            command: None,
        };
        if descriptor.takes_command {
            let command = rest.map(unquote).unwrap_or_default();
            if command.trim().is_empty() {
                return Err(LoadError::Invalid(format!(
                    "load spec {t:?}: no command (accepted: cmd:COMMAND, e.g. cmd:\"stress-ng --cpu 1\")"
                )));
            }
            spec.command = Some(command.to_string());
            return Ok(spec);
        }
        if let Some(rest) = rest {
            if rest.trim().is_empty() {
                return Err(bad("no options after ':'".into()));
            }
            for part in rest.split(',') {
                let part = part.trim();
                if part.is_empty() {
                    return Err(bad(
                        "an empty option (two commas, or a trailing comma)".into()
                    ));
                }
                let Some((name, value)) = part.split_once('=') else {
                    return Err(bad(format!(
                        "option {part:?} has no value: write NAME=VALUE ({})",
                        option_names(descriptor)
                    )));
                };
                let (name, value) = (name.trim(), value.trim());
                let Some(desc) = descriptor.options.iter().find(|o| o.name == name) else {
                    return Err(bad(format!(
                        "unknown option {name:?} for {} ({})",
                        descriptor.name,
                        option_names(descriptor)
                    )));
                };
                if spec.given.contains(&desc.name) {
                    return Err(bad(format!("option {name:?} given twice")));
                }
                let v = parse_value(desc, value).map_err(|e| {
                    LoadError::Invalid(format!("load spec {t:?}: {name}={value:?}: {e}"))
                })?;
                spec.given.push(desc.name);
                spec.values.push((desc.name, v));
            }
        }
        for desc in descriptor.options {
            if spec.given.contains(&desc.name) {
                continue;
            }
            if let OptDefault::Value(d) = desc.default {
                let v = parse_value(desc, d).map_err(|e| {
                    LoadError::Invalid(format!(
                        "{}: the default of {} does not parse: {e}",
                        descriptor.name, desc.name
                    ))
                })?;
                spec.values.push((desc.name, v));
            }
        }
        spec.values.sort_by_key(|(name, _)| {
            descriptor
                .options
                .iter()
                .position(|o| o.name == *name)
                .unwrap_or(usize::MAX)
        });
        if let Some(check) = descriptor.validate
            && let Err(problem) = check(&spec)
        {
            return Err(bad(problem));
        }
        Ok(spec)
    }

    /// The spec as the user wrote it (trimmed).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The kind, e.g. `io`.
    pub fn kind(&self) -> &'static str {
        self.descriptor.name
    }

    /// The kind's description in the registry.
    pub fn descriptor(&self) -> &'static LoadDescriptor {
        self.descriptor
    }

    /// The command line of a `cmd` load.
    pub fn command(&self) -> Option<&str> {
        self.command.as_deref()
    }

    /// The value of an option: given, or its default. `None` for an option whose default is
    /// decided when the load starts (one per CPU, a fresh temporary directory).
    pub fn option(&self, name: &str) -> Option<&OptValue> {
        self.values.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Whether the user gave this option.
    pub fn is_given(&self, name: &str) -> bool {
        self.given.contains(&name)
    }

    pub(crate) fn count(&self, name: &str) -> Option<u64> {
        match self.option(name) {
            Some(OptValue::Count(n)) => Some(*n),
            _ => None,
        }
    }

    pub(crate) fn size(&self, name: &str) -> Option<u64> {
        match self.option(name) {
            Some(OptValue::Size(n)) => Some(*n),
            _ => None,
        }
    }

    pub(crate) fn duration_ns(&self, name: &str) -> Option<u64> {
        match self.option(name) {
            Some(OptValue::Duration(n)) => Some(*n),
            _ => None,
        }
    }

    pub(crate) fn flag(&self, name: &str) -> bool {
        matches!(self.option(name), Some(OptValue::Bool(true)))
    }

    pub(crate) fn choice(&self, name: &str) -> Option<&'static str> {
        match self.option(name) {
            Some(OptValue::Choice(w)) => Some(w),
            _ => None,
        }
    }

    pub(crate) fn path(&self, name: &str) -> Option<&std::path::Path> {
        match self.option(name) {
            Some(OptValue::Path(p)) => Some(p),
            _ => None,
        }
    }

    /// Workers (or threads) asked for, or one per CPU of the set.
    pub(crate) fn workers(&self, name: &str, cpus: usize) -> usize {
        self.count(name)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
            .unwrap_or(cpus)
            .max(1)
    }
}

fn option_names(d: &LoadDescriptor) -> String {
    if d.options.is_empty() {
        format!("{} takes no options", d.name)
    } else {
        let names: Vec<_> = d.options.iter().map(|o| o.name).collect();
        format!("options of {}: {}", d.name, names.join(", "))
    }
}

/// Remove one pair of matching surrounding quotes.
fn unquote(s: &str) -> &str {
    let t = s.trim();
    for q in ['"', '\''] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            return &t[1..t.len() - 1];
        }
    }
    t
}

fn parse_value(desc: &OptionDesc, value: &str) -> Result<OptValue, String> {
    let out_of_range = |shown: &str| {
        format!(
            "{shown} is out of range (accepted: {} {})",
            desc.name,
            desc.accepted()
        )
    };
    match desc.kind {
        OptKind::Count { min, max } => {
            let n: u64 = value.parse().map_err(|_| {
                format!("{value:?} is not a whole number (accepted: {min} to {max})")
            })?;
            if n < min || n > max {
                return Err(out_of_range(value));
            }
            Ok(OptValue::Count(n))
        }
        OptKind::Size { min, max } => {
            let n = parse_size(value)?;
            if n < min || n > max {
                return Err(out_of_range(value));
            }
            Ok(OptValue::Size(n))
        }
        OptKind::Duration { min, max } => {
            let n = parse_duration(value, None).map_err(|e| e.to_string())?;
            if n < min || n > max {
                return Err(out_of_range(value));
            }
            Ok(OptValue::Duration(n))
        }
        OptKind::Bool => match value.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok(OptValue::Bool(true)),
            "false" | "no" | "off" | "0" => Ok(OptValue::Bool(false)),
            _ => Err(format!(
                "{value:?} is not a boolean (accepted: {BOOL_FORM})"
            )),
        },
        OptKind::Choice(words) => words
            .iter()
            .find(|w| **w == value)
            .map(|w| OptValue::Choice(w))
            .ok_or_else(|| format!("unknown value {value:?} (accepted: {})", words.join(", "))),
        OptKind::Path => {
            let p = unquote(value);
            if p.is_empty() {
                Err("an empty path (accepted: a directory)".into())
            } else {
                Ok(OptValue::Path(PathBuf::from(p)))
            }
        }
    }
}

/// Parse a size in bytes: `512`, `4k`, `1M`, `256M`, `2G` (binary multiples; `K`/`k` alike, an
/// optional trailing `B` or `iB`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let bad = || format!("{s:?} is not a size (accepted: {SIZE_FORM})");
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if digits == 0 {
        return Err(bad());
    }
    let (num, suffix) = s.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("size {s:?} is too large"))?;
    let suffix = suffix
        .strip_suffix("iB")
        .or_else(|| suffix.strip_suffix('B'))
        .or_else(|| suffix.strip_suffix('b'))
        .unwrap_or(suffix);
    let shift = match suffix {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        _ => return Err(bad()),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size {s:?} is too large"))
}

/// A size in its shortest exact form: `4k`, `1M`, `1536`.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "k")] {
        let m = 1u64 << shift;
        if bytes >= m && bytes.is_multiple_of(m) {
            return format!("{}{unit}", bytes / m);
        }
    }
    bytes.to_string()
}
