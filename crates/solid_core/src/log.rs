//! The one log formatter, for lines built in Rust and in Ruby
//! (`SolidJobs::Log` calls [`log_fields`] through `Native::Log`), so every
//! line of a process has the same shape whoever wrote it.
//!
//! Each line carries an ISO-8601 UTC timestamp with milliseconds, the level,
//! the pid and the fields that apply (node, worker, job, task, channel, then
//! event fields such as `duration_ms`), in one of two formats:
//!
//! - `text`: `2026-12-01T12:00:00.123Z INFO pid=123 node=… worker=3 task=Foo
//!   job=… channel=default message key=value …`; a value with a space, a
//!   quote or `=` is quoted as a JSON string, and control characters of the
//!   message are escaped, so one event is always one line.
//! - `json`: one object per line with the keys `ts`, `level`, `pid`,
//!   `node_id`, `worker_id`, `job_id`, `task`, `channel` (each when it
//!   applies), `msg`, then the event fields.
//!
//! Guarantees: every line is redacted (each string is passed through
//! [`crate::redact::redact`] before it is escaped, so masking can never
//! break the escaping); a line is written with one `write(2)`, so lines of
//! threads and Ractors never interleave (below `PIPE_BUF`, 4 KiB, even on a
//! pipe shared by processes); the level and format are process-wide atomics
//! that configuration may change at any time (`SOLID_JOBS_LOG_LEVEL` and
//! `SOLID_JOBS_LOG_FORMAT` are only their defaults, read on first use).
//!
//! With a logger route on ([`set_routed`]), lines go to a bounded queue a
//! Ruby thread drains into the application's Logger instead of stderr; a
//! full queue drops the line and counts it ([`take_dropped`]), so a slow
//! logger never blocks a worker or an I/O thread.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

/// A line's level; the ranks are those of Ruby's `Logger::Severity`, so a
/// routed line keeps its severity without a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

/// The minimum rank that silences every line (`none`).
pub const SILENT: u8 = 4;

impl Level {
    pub fn parse(name: &str) -> Option<Level> {
        match name.to_ascii_lowercase().as_str() {
            "debug" => Some(Level::Debug),
            "info" => Some(Level::Info),
            "warn" | "warning" => Some(Level::Warn),
            "error" => Some(Level::Error),
            _ => None,
        }
    }

    pub fn from_rank(rank: u8) -> Option<Level> {
        [Level::Debug, Level::Info, Level::Warn, Level::Error].get(usize::from(rank)).copied()
    }

    pub fn name(self) -> &'static str {
        ["DEBUG", "INFO", "WARN", "ERROR"][self as usize]
    }
}

/// The minimum rank for a level setting (`debug` … `error`, or `none`).
pub fn parse_threshold(name: &str) -> Option<u8> {
    if name.eq_ignore_ascii_case("none") {
        return Some(SILENT);
    }
    Level::parse(name).map(|l| l as u8)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Format {
    Text = 0,
    Json = 1,
}

impl Format {
    pub fn parse(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "text" => Some(Format::Text),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// Not yet set: the environment's default is read on first use.
const UNSET: u8 = u8::MAX;
static THRESHOLD: AtomicU8 = AtomicU8::new(UNSET);
static FORMAT: AtomicU8 = AtomicU8::new(UNSET);
static NODE_ID: RwLock<Option<Arc<str>>> = RwLock::new(None);

/// An unknown value in the environment falls back to the default, as it
/// always has: a typo there must not stop a process from starting (the
/// configuration setters, which can refuse, check theirs).
fn from_env<T>(var: &str, parse: impl Fn(&str) -> Option<T>, default: T) -> T {
    std::env::var(var).ok().and_then(|v| parse(&v)).unwrap_or(default)
}

fn load(cell: &AtomicU8, default: impl Fn() -> u8) -> u8 {
    let v = cell.load(Ordering::Relaxed);
    if v != UNSET {
        return v;
    }
    // A setter racing this keeps its value: only UNSET is replaced.
    let _ = cell.compare_exchange(UNSET, default(), Ordering::Relaxed, Ordering::Relaxed);
    cell.load(Ordering::Relaxed)
}

/// The minimum rank written (0 debug … 3 error, [`SILENT`]).
pub fn threshold() -> u8 {
    load(&THRESHOLD, || from_env("SOLID_JOBS_LOG_LEVEL", parse_threshold, Level::Info as u8))
}

pub fn set_threshold(rank: u8) {
    THRESHOLD.store(rank.min(SILENT), Ordering::Relaxed);
}

pub fn enabled(level: Level) -> bool {
    level as u8 >= threshold()
}

pub fn format() -> Format {
    if load(&FORMAT, || from_env("SOLID_JOBS_LOG_FORMAT", Format::parse, Format::Text) as u8) == Format::Json as u8 {
        Format::Json
    } else {
        Format::Text
    }
}

pub fn set_format(format: Format) {
    FORMAT.store(format as u8, Ordering::Relaxed);
}

/// The node this process runs, added to every line that names none (set
/// when a node starts; the last started when a process runs several).
pub fn set_node_id(node_id: Option<&str>) {
    *NODE_ID.write().unwrap_or_else(|p| p.into_inner()) = node_id.map(Arc::from);
}

/// The node lines name when they name none (nil when no node runs).
pub fn node_id() -> Option<Arc<str>> {
    NODE_ID.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// One field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    Float(f64),
    Bool(bool),
    Null,
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Value<'_> {
    fn from(s: String) -> Self {
        Value::Str(Cow::Owned(s))
    }
}

impl From<i64> for Value<'_> {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}

impl From<u64> for Value<'_> {
    fn from(n: u64) -> Self {
        i64::try_from(n).map_or(Value::Float(n as f64), Value::Int)
    }
}

impl From<usize> for Value<'_> {
    fn from(n: usize) -> Self {
        Value::from(n as u64)
    }
}

impl From<u32> for Value<'_> {
    fn from(n: u32) -> Self {
        Value::Int(i64::from(n))
    }
}

impl From<f64> for Value<'_> {
    fn from(x: f64) -> Self {
        Value::Float(x)
    }
}

impl From<bool> for Value<'_> {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// The identifying fields, in the order both formats print them, with
/// their short names in `text`.
const IDS: [(&str, &str); 5] =
    [("node_id", "node"), ("worker_id", "worker"), ("task", "task"), ("job_id", "job"), ("channel", "channel")];

/// Writes one line. Every line is redacted on its way out, whatever built
/// it, so no message that quotes a URL or a backend spec prints a password.
/// `level` is a level name (`"WARN"`); an unknown one is written as info.
pub fn log(level: &str, msg: &str) {
    log_fields(Level::parse(level).unwrap_or(Level::Info), msg, &[]);
}

/// Writes one line with `fields` (identifiers and event fields).
pub fn log_fields(level: Level, msg: &str, fields: &[(&str, Value<'_>)]) {
    if !enabled(level) {
        return;
    }
    emit(level, render(level, msg, fields));
}

/// One line as this process writes it now (time, pid, node, format).
fn render(level: Level, msg: &str, fields: &[(&str, Value<'_>)]) -> String {
    let node = node_id();
    format_line(format(), level, now_ms(), std::process::id(), node.as_deref(), msg, fields)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// One line, without its newline. `node` is used when `fields` name no
/// `node_id`.
pub fn format_line(
    format: Format,
    level: Level,
    ts_ms: u64,
    pid: u32,
    node: Option<&str>,
    msg: &str,
    fields: &[(&str, Value<'_>)],
) -> String {
    let mut out = String::with_capacity(96 + msg.len() + fields.len() * 24);
    let node_value = node.map(Value::from);
    let ids = IDS.map(|(key, short)| {
        let given = fields.iter().find(|(k, _)| *k == key).map(|(_, v)| v);
        let value = given.or(if key == "node_id" { node_value.as_ref() } else { None });
        (key, short, value.filter(|v| **v != Value::Null))
    });
    // A field that does not apply (nil) is left out rather than written
    // empty. A field named like a secret (`password`, `auth_token`) is
    // masked whole: redaction of a value alone cannot see its key. A key
    // is written only with the characters of a key (`[A-Za-z0-9_.-]`,
    // others as `_`), so no key can start another field or line.
    let mask = Value::Str(Cow::Borrowed(crate::redact::MASK));
    let rest: Vec<(String, &Value<'_>)> = fields
        .iter()
        .filter(|(k, v)| *v != Value::Null && !IDS.iter().any(|(id, _)| id == k))
        .map(|(k, v)| (safe_key(k), if crate::redact::is_secret_key(k) { &mask } else { v }))
        .collect();
    let msg = crate::redact::redact(msg);
    match format {
        Format::Text => {
            out.push_str(&iso8601_ms(ts_ms));
            let _ = write!(out, " {} pid={pid}", level.name());
            for (_, short, value) in ids {
                if let Some(v) = value {
                    let _ = write!(out, " {short}=");
                    text_value(&mut out, v);
                }
            }
            out.push(' ');
            escape_controls(&mut out, &msg);
            for (key, value) in &rest {
                let _ = write!(out, " {key}=");
                text_value(&mut out, value);
            }
        }
        Format::Json => {
            out.push_str("{\"ts\":\"");
            out.push_str(&iso8601_ms(ts_ms));
            let _ = write!(out, "\",\"level\":\"{}\",\"pid\":{pid}", level.name());
            for (key, _, value) in ids {
                if let Some(v) = value {
                    json_pair(&mut out, key, v);
                }
            }
            out.push_str(",\"msg\":");
            json_string(&mut out, &msg);
            for (key, value) in &rest {
                json_pair(&mut out, key, value);
            }
            out.push('}');
        }
    }
    out
}

fn json_pair(out: &mut String, key: &str, value: &Value<'_>) {
    out.push(',');
    json_string(out, key);
    out.push(':');
    match value {
        Value::Str(s) => json_string(out, &crate::redact::redact(s)),
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(x) if x.is_finite() => {
            let _ = write!(out, "{x}");
        }
        Value::Float(_) | Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
    }
}

fn text_value(out: &mut String, value: &Value<'_>) {
    match value {
        Value::Str(s) => {
            let s = crate::redact::redact(s);
            if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '=') {
                json_string(out, &s);
            } else {
                out.push_str(&s);
            }
        }
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(x) => {
            let _ = write!(out, "{x}");
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Null => out.push_str("null"),
    }
}

/// `s` as a JSON string: quotes, backslashes and every control character
/// escaped (the line separators U+2028/9 too, which some readers split on).
pub fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A field's key as written: the characters of a key, any other as `_`.
fn safe_key(key: &str) -> String {
    key.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') { c } else { '_' }).collect()
}

/// The message in `text`: control characters, and the line and paragraph
/// separators some readers split on, escaped as in JSON (a backtrace's
/// newlines become `\n`), everything else as it is.
fn escape_controls(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// `2026-12-01T12:00:00.123Z` for milliseconds since the Unix epoch (the
/// proleptic Gregorian calendar, days to civil date as in Hinnant's
/// `civil_from_days`).
pub fn iso8601_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem % 3600 / 60, rem % 60, ms % 1000)
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Lines waiting for the logger thread, at most this many; beyond it a line
/// is dropped and counted rather than blocking its writer.
pub const ROUTE_CAPACITY: usize = 10_000;

type Queue = (Sender<(Level, String)>, Receiver<(Level, String)>);

static ROUTED: AtomicBool = AtomicBool::new(false);
static DROPPED: AtomicU64 = AtomicU64::new(0);

fn queue() -> &'static Queue {
    static QUEUE: OnceLock<Queue> = OnceLock::new();
    QUEUE.get_or_init(|| bounded(ROUTE_CAPACITY))
}

/// Sends lines to the logger queue (true) or straight to stderr (false).
pub fn set_routed(routed: bool) {
    ROUTED.store(routed, Ordering::Release);
}

pub fn routed() -> bool {
    ROUTED.load(Ordering::Acquire)
}

/// The queue the logger thread drains.
pub fn routed_lines() -> &'static Receiver<(Level, String)> {
    &queue().1
}

/// Lines dropped because the queue was full since the last call.
pub fn take_dropped() -> u64 {
    DROPPED.swap(0, Ordering::Relaxed)
}

/// The warning that says how many lines were dropped since the last call,
/// for the logger thread to hand over itself after a batch: queued like
/// other lines, it could be dropped by the same full queue, and the count
/// with it.
pub fn take_dropped_notice() -> Option<(Level, String)> {
    let dropped = take_dropped();
    (dropped > 0 && enabled(Level::Warn)).then(|| {
        let msg = format!("{dropped} log line(s) dropped: the logger did not keep up ({ROUTE_CAPACITY} lines queued)");
        (Level::Warn, render(Level::Warn, &msg, &[("event", "log.dropped".into()), ("dropped", dropped.into())]))
    })
}

fn emit(level: Level, line: String) {
    if routed() {
        match queue().0.try_send((level, line)) {
            Ok(()) => return,
            Err(TrySendError::Full(_)) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
                return;
            }
            // Never happens (the queue is static); stderr then.
            Err(TrySendError::Disconnected((_, line))) => return write_stderr(line),
        }
    }
    write_stderr(line);
}

/// One `write(2)` of the line and its newline: writes of up to `PIPE_BUF`
/// bytes are atomic, so concurrent lines never interleave. A short write
/// (a longer line) is finished with further writes.
fn write_stderr(mut line: String) {
    line.push('\n');
    let mut bytes = line.as_bytes();
    while !bytes.is_empty() {
        // SAFETY: a valid buffer of `bytes.len()` bytes; fd 2 may be closed,
        // which only returns an error.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// A log line written from a retry loop, which may meet the same failure
/// many times a second (Redis out of memory, a script error): the first
/// occurrence is written at once, then at most one line per `every`, saying
/// how many were left out. One per call site, so what is left out is the
/// same kind of line.
pub struct Throttled {
    every: std::time::Duration,
    /// When the last line was written, and how many were left out since.
    state: std::sync::Mutex<(Option<std::time::Instant>, u64)>,
}

/// How often a repeating warning is written at most.
pub const REPEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

impl Throttled {
    pub const fn new(every: std::time::Duration) -> Self {
        Throttled { every, state: std::sync::Mutex::new((None, 0)) }
    }

    /// Writes `msg` unless a line was written less than `every` ago; returns
    /// whether it was written.
    pub fn log(&self, level: &str, msg: &str) -> bool {
        let now = std::time::Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.0.is_some_and(|last| now.duration_since(last) < self.every) {
            state.1 += 1;
            return false;
        }
        let left_out = std::mem::take(&mut state.1);
        state.0 = Some(now);
        drop(state);
        if left_out > 0 {
            log(level, &format!("{msg} ({left_out} more like this since the last one)"));
        } else {
            log(level, msg);
        }
        true
    }
}

impl Default for Throttled {
    fn default() -> Self {
        Throttled::new(REPEAT_EVERY)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_repeating_line_is_written_once_per_interval() {
        let t = Throttled::new(Duration::from_millis(200));
        assert!(t.log("DEBUG", "first"));
        assert!((0..50).all(|_| !t.log("DEBUG", "again")), "left out within the interval");
        // Wall time: the 200 ms interval passes.
        std::thread::sleep(Duration::from_millis(210));
        assert!(t.log("DEBUG", "after the interval"));
        assert_eq!(t.state.lock().unwrap().1, 0, "the count of lines left out restarts");
    }

    #[test]
    fn timestamps_are_iso8601_utc_with_milliseconds() {
        assert_eq!(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(1), "1970-01-01T00:00:00.001Z");
        assert_eq!(iso8601_ms(86_399_999), "1970-01-01T23:59:59.999Z");
        // 2000 is a leap year (divisible by 400), 1900 and 2100 are not.
        assert_eq!(iso8601_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601_ms(951_868_800_000), "2000-03-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(1_709_164_800_123), "2024-02-29T00:00:00.123Z");
        assert_eq!(iso8601_ms(1_709_251_199_999), "2024-02-29T23:59:59.999Z");
        assert_eq!(iso8601_ms(1_735_689_599_000), "2024-12-31T23:59:59.000Z");
        assert_eq!(iso8601_ms(1_735_689_600_000), "2025-01-01T00:00:00.000Z");
        assert_eq!(iso8601_ms(4_107_542_400_000), "2100-03-01T00:00:00.000Z", "2100 has no February 29th");
        assert_eq!(iso8601_ms(1_796_126_400_123), "2026-12-01T12:00:00.123Z");
    }

    #[test]
    fn every_day_of_four_centuries_follows_the_previous_one() {
        let mut previous = civil_from_days(-1);
        assert_eq!(previous, (1969, 12, 31));
        for days in 0..146_097 {
            let (y, m, d) = civil_from_days(days);
            let next_day = (y, m, d) == (previous.0, previous.1, previous.2 + 1);
            let next_month = d == 1 && ((y, m) == (previous.0, previous.1 + 1) || (m == 1 && y == previous.0 + 1));
            assert!(next_day || next_month, "{previous:?} then {:?}", (y, m, d));
            if m == 2 && d == 29 {
                assert!(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0), "no February 29th in {y}");
            }
            previous = (y, m, d);
        }
    }

    fn json(line: &str) -> serde_json::Value {
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    #[test]
    fn text_keeps_one_event_per_line_and_masks_secret_named_fields() {
        let fields = [
            ("evil key=1\ninjected", Value::from("v")),
            ("password", Value::from("hunter2")),
            ("auth_token", Value::from("tok123")),
        ];
        let line = format_line(Format::Text, Level::Info, 0, 7, None, "sep:\u{2028}FAKE \u{2029}x", &fields);
        assert!(!line.contains('\n') && !line.contains('\u{2028}') && !line.contains('\u{2029}'), "{line}");
        assert!(line.contains(" evil_key_1_injected=v"), "{line}");
        assert!(!line.contains("hunter2") && !line.contains("tok123"), "{line}");
        assert!(line.contains(" password=***") && line.contains(" auth_token=***"), "{line}");
        let v = json(&format_line(Format::Json, Level::Info, 0, 7, None, "m", &fields));
        assert_eq!((v["password"].as_str(), v["auth_token"].as_str()), (Some("***"), Some("***")));
        assert_eq!(v["evil_key_1_injected"], "v");
    }

    #[test]
    fn json_escapes_quotes_newlines_and_control_characters() {
        let nasty = "say \"hi\"\\ \n\r\t \u{0}\u{1b}[31m \u{7f} \u{2028} é 日本";
        let line = format_line(Format::Json, Level::Warn, 0, 7, None, nasty, &[("error_class", nasty.into())]);
        assert!(!line.contains('\n') && !line.contains('\u{1b}') && !line.contains('\u{2028}'), "{line}");
        let v = json(&line);
        assert_eq!(v["msg"], nasty);
        assert_eq!(v["error_class"], nasty);
        assert_eq!(v["level"], "WARN");
        assert_eq!(v["pid"], 7);
        assert_eq!(v["ts"], "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn bytes_that_are_not_utf8_still_make_json() {
        let bytes = b"bad \xff\xfe bytes \xc3";
        let text = String::from_utf8_lossy(bytes);
        let line = format_line(Format::Json, Level::Info, 0, 1, None, &text, &[("task", Value::Str(text.clone()))]);
        assert_eq!(json(&line)["msg"], "bad \u{fffd}\u{fffd} bytes \u{fffd}");
    }

    #[test]
    fn json_names_the_ids_first_then_the_event_fields() {
        let fields: [(&str, Value); 7] = [
            ("duration_ms", 1.25.into()),
            ("job_id", "j1".into()),
            ("task", "Mailer".into()),
            ("worker_id", 3u32.into()),
            ("attempt", Value::Null),
            ("ok", true.into()),
            ("retry_in_s", f64::NAN.into()),
        ];
        let line = format_line(Format::Json, Level::Debug, 1_000, 9, Some("n1"), "finished", &fields);
        assert_eq!(
            line,
            r#"{"ts":"1970-01-01T00:00:01.000Z","level":"DEBUG","pid":9,"node_id":"n1","worker_id":3,"task":"Mailer","job_id":"j1","msg":"finished","duration_ms":1.25,"ok":true,"retry_in_s":null}"#
        );
        let own_node = format_line(Format::Json, Level::Info, 0, 9, Some("n1"), "m", &[("node_id", "n2".into())]);
        assert_eq!(json(&own_node)["node_id"], "n2", "a line's own node wins over the process's");
    }

    #[test]
    fn text_is_one_line_with_short_id_names_and_quoted_values() {
        let fields: [(&str, Value); 5] = [
            ("job_id", "j1".into()),
            ("channel", "default".into()),
            ("error_class", "RuntimeError".into()),
            ("reason", "gave up: too many".into()),
            ("retry_in_s", 2.5.into()),
        ];
        let line = format_line(Format::Text, Level::Info, 1_500, 42, Some("n1"), "failed\nbadly", &fields);
        assert_eq!(
            line,
            r#"1970-01-01T00:00:01.500Z INFO pid=42 node=n1 job=j1 channel=default failed\nbadly error_class=RuntimeError reason="gave up: too many" retry_in_s=2.5"#
        );
    }

    #[test]
    fn every_string_is_redacted_before_it_is_escaped() {
        let msg = "cannot reach redis://:hunter2@cache:6379 with password=x\"y";
        for format in [Format::Text, Format::Json] {
            let line = format_line(format, Level::Warn, 0, 1, None, msg, &[("url", "redis://u:hunter2@h".into())]);
            assert!(!line.contains("hunter2") && !line.contains("x\\\"y"), "{line}");
            if format == Format::Json {
                let v = json(&line);
                assert_eq!(v["url"], "redis://u:***@h");
                assert!(v["msg"]
                    .as_str()
                    .unwrap()
                    .starts_with("cannot reach redis://:***@cache:6379 with password=***"));
            }
        }
    }

    #[test]
    fn levels_and_thresholds_parse() {
        assert_eq!(parse_threshold("DEBUG"), Some(0));
        assert_eq!(parse_threshold("none"), Some(SILENT));
        assert_eq!(parse_threshold("loud"), None);
        assert_eq!(Level::from_rank(2), Some(Level::Warn));
        assert_eq!(Level::from_rank(4), None);
        assert_eq!(Format::parse("JSON"), Some(Format::Json));
        assert_eq!(Format::parse("yaml"), None);
    }
}
