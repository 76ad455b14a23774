//! Reading the data directory back: the snapshot, then the logs after it.
//!
//! Rules (see docs/protocol.md, "Durability"):
//! - The snapshot is written to a temp file, fsync'd and renamed, so it is
//!   either absent or complete; any damage in it is corruption (an error).
//! - Logs older than the snapshot's generation are already contained in it
//!   and are deleted.
//! - In the newest log, a torn tail is a write that never completed: the
//!   file ends inside the last record, or a damaged record (cut short, or
//!   failing its checksum) is followed by nothing but zeros, as power loss
//!   leaves zero-filled blocks. It is truncated away and reported (what was
//!   dropped, and where). Damage followed by more data is corruption: an
//!   error naming file and offset; `solid-engine-server --repair` cuts
//!   there once an operator confirms.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use super::log::{log_header, log_path, LOG_HEADER, LOG_MAGIC};
use super::record::{read_frame, FrameError, Record, FRAME_HEADER};
use super::snapshot::{SNAPSHOT_FILE, SNAPSHOT_MAGIC, SNAPSHOT_TMP};
use crate::engine::Engine;
use crate::error::{Error, Result};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    pub snapshot_jobs: u64,
    pub log_records: u64,
    pub logs_replayed: usize,
    /// Bytes cut from the tail of the newest log, and where the cut was.
    pub truncated: Option<(u64, u64)>,
    /// What the cut dropped (a partial record, zeros, ...), for the log.
    pub torn: Option<String>,
    /// The generation and valid size of the log to continue.
    pub log_gen: u64,
    pub log_size: u64,
    /// Highest fence seen in the snapshot and logs, plus one.
    pub next_fence: u64,
}

fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> Error {
    Error::Corrupt { file: path.display().to_string(), offset, reason: reason.into() }
}

/// Log generations present in `dir`, ascending.
fn log_generations(dir: &Path) -> Result<Vec<u64>> {
    let mut gens = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(stem) = name.strip_suffix(".log") {
            if let Ok(gen) = stem.parse::<u64>() {
                gens.push(gen);
            }
        }
    }
    gens.sort_unstable();
    Ok(gens)
}

/// Loads the snapshot into `engine`; returns (log generation to continue
/// from, next fence, jobs loaded). No snapshot: generation 1.
fn load_snapshot(dir: &Path, engine: &mut Engine) -> Result<(u64, u64, u64)> {
    let _ = fs::remove_file(dir.join(SNAPSHOT_TMP));
    let path = dir.join(SNAPSHOT_FILE);
    let data = match fs::read(&path) {
        Ok(data) => data,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((1, 1, 0)),
        Err(e) => return Err(e.into()),
    };
    if data.len() < SNAPSHOT_MAGIC.len() || &data[..SNAPSHOT_MAGIC.len()] != SNAPSHOT_MAGIC {
        return Err(corrupt(&path, 0, "not a snapshot file"));
    }
    let mut pos = SNAPSHOT_MAGIC.len();
    let mut meta = None;
    let mut jobs = 0u64;
    loop {
        let (record, used) = read_frame(&data[pos..])
            .map_err(|e| corrupt(&path, pos as u64, format!("{e:?} (snapshots are never torn)")))?;
        match record {
            Record::Meta { next_fence, log_gen } if meta.is_none() => meta = Some((log_gen, next_fence)),
            Record::Job(image) if meta.is_some() => {
                engine.import(image);
                jobs += 1;
            }
            Record::End { jobs: expected } if expected == jobs && pos + used == data.len() => {
                let (gen, fence) = meta.expect("checked");
                return Ok((gen, fence, jobs));
            }
            other => return Err(corrupt(&path, pos as u64, format!("unexpected record {other:?}"))),
        }
        pos += used;
    }
}

/// Where and how a log is damaged.
#[derive(Debug)]
struct Damage {
    offset: u64,
    /// `Some(what was dropped)` when the damage is a torn tail: a write
    /// that never completed, followed by nothing but zeros.
    torn: Option<String>,
    reason: String,
}

/// Outcome of scanning one log file.
struct Scan {
    records: u64,
    valid_len: u64,
    damage: Option<Damage>,
}

/// Whether `rest`, which starts with a frame that failed with `error`, is a
/// torn tail, and a description of it for the log. A torn tail is what an
/// interrupted append leaves: the file ends inside the record, or the
/// record's bytes (cut short or wrong) are followed by nothing but zeros,
/// as power loss leaves blocks whose size reached the disk and whose data
/// did not. A record whose checksum matches but does not decode is never
/// torn (it was written whole), and neither is damage with data after it:
/// that is corruption in the middle, which recovery must not guess about.
fn torn_tail(rest: &[u8], error: &FrameError) -> Option<String> {
    let zeros = |b: &[u8]| b.iter().all(|&x| x == 0);
    let claimed = || u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
    match error {
        FrameError::Incomplete if rest.len() < FRAME_HEADER => {
            Some(format!("a partial record header of {} bytes", rest.len()))
        }
        FrameError::Incomplete => {
            Some(format!("a partial record: {} of {} bytes", rest.len(), FRAME_HEADER + claimed()))
        }
        FrameError::BadLength if zeros(rest) => Some(format!("{} zero bytes", rest.len())),
        FrameError::BadLength | FrameError::BadBody => None,
        FrameError::Checksum => {
            let end = FRAME_HEADER + claimed();
            let after = &rest[end..];
            if !zeros(after) {
                return None;
            }
            let nonzero = rest[..end].iter().filter(|&&b| b != 0).count();
            Some(match after.len() {
                0 => format!("a last record of {end} bytes failing its checksum"),
                n => format!("a record of {end} bytes failing its checksum ({nonzero} non-zero), then {n} zero bytes"),
            })
        }
    }
}

/// Scans one log, applying every good record to `engine`, up to the first
/// damaged one.
fn scan_log(path: &Path, gen: u64, engine: &mut Engine) -> Result<Scan> {
    let data = fs::read(path)?;
    let damaged = |offset: usize, torn: Option<String>, reason: &str| Damage {
        offset: offset as u64,
        torn,
        reason: reason.to_string(),
    };
    if data.len() < LOG_HEADER {
        // Created but the header never fully reached the disk.
        let torn = Some(format!("a partial log header of {} bytes", data.len()));
        return Ok(Scan { records: 0, valid_len: 0, damage: Some(damaged(0, torn, "log header missing")) });
    }
    let header_gen = u64::from_le_bytes(data[12..20].try_into().expect("8 bytes"));
    if &data[..8] != LOG_MAGIC || header_gen != gen {
        return Ok(Scan { records: 0, valid_len: 0, damage: Some(damaged(0, None, "bad log header")) });
    }
    let mut pos = LOG_HEADER;
    let mut records = 0;
    while pos < data.len() {
        let rest = &data[pos..];
        match read_frame(rest) {
            Ok((Record::Event(event), used)) => {
                engine.apply(event);
                records += 1;
                pos += used;
            }
            Ok((other, _)) => {
                let reason = format!("unexpected record {other:?}");
                return Ok(Scan { records, valid_len: pos as u64, damage: Some(damaged(pos, None, &reason)) });
            }
            Err(error) => {
                let torn = torn_tail(rest, &error);
                let reason = match torn {
                    Some(_) => format!("{error:?} (torn tail)"),
                    None => format!("{error:?}: damaged record followed by more data"),
                };
                return Ok(Scan { records, valid_len: pos as u64, damage: Some(damaged(pos, torn, &reason)) });
            }
        }
    }
    Ok(Scan { records, valid_len: data.len() as u64, damage: None })
}

/// The log generations recovery reads (those at or after the snapshot's),
/// after deleting the ones the snapshot supersedes.
fn live_logs(dir: &Path, snapshot_gen: u64) -> Result<Vec<u64>> {
    let mut live = Vec::new();
    for gen in log_generations(dir)? {
        if gen < snapshot_gen {
            fs::remove_file(log_path(dir, gen))?;
        } else {
            live.push(gen);
        }
    }
    Ok(live)
}

/// Rebuilds `engine` from `dir`; truncates a torn tail; deletes logs the
/// snapshot supersedes. Leaves a valid log file to continue writing.
pub fn recover(dir: &Path, engine: &mut Engine) -> Result<RecoveryReport> {
    let (snapshot_gen, next_fence, snapshot_jobs) = load_snapshot(dir, engine)?;
    engine.raise_fence_floor(next_fence);
    let mut report = RecoveryReport { snapshot_jobs, log_gen: snapshot_gen, ..Default::default() };
    let live = live_logs(dir, snapshot_gen)?;
    for (i, &gen) in live.iter().enumerate() {
        let path: PathBuf = log_path(dir, gen);
        let is_last = i + 1 == live.len();
        let scan = scan_log(&path, gen, engine)?;
        report.log_records += scan.records;
        report.logs_replayed += 1;
        if let Some(damage) = scan.damage {
            // Only the newest log is being appended to: damage anywhere else,
            // or damage with data after it, is corruption.
            let Some(torn) = damage.torn.filter(|_| is_last) else {
                return Err(corrupt(
                    &path,
                    damage.offset,
                    format!("{} (see solid-engine-server --repair)", damage.reason),
                ));
            };
            let full = fs::metadata(&path)?.len();
            let keep = scan.valid_len;
            report.torn = Some(torn);
            if keep < LOG_HEADER as u64 {
                fs::remove_file(&path)?;
                report.truncated = Some((full, 0));
                continue;
            }
            let file = OpenOptions::new().write(true).open(&path)?;
            file.set_len(keep)?;
            file.sync_all()?;
            report.truncated = Some((full - keep, keep));
        }
        report.log_gen = gen;
        report.log_size = scan.valid_len;
    }
    report.next_fence = engine.next_fence();
    Ok(report)
}

/// What `--repair` would do: cut `file` at `offset` (the first bad record)
/// and delete the later generations, whose records continue a state that
/// no longer exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairPlan {
    pub file: PathBuf,
    pub offset: u64,
    pub file_len: u64,
    pub reason: String,
    /// Good records before the cut (in every log read).
    pub records_kept: u64,
    pub later_logs: Vec<PathBuf>,
    /// Whether the plan was carried out (the caller confirmed it).
    pub applied: bool,
}

impl RepairPlan {
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{}: first bad record at offset {} ({}); cutting there drops {} bytes; {} good records are kept",
            self.file.display(),
            self.offset,
            self.reason,
            self.file_len - self.offset,
            self.records_kept
        );
        for later in &self.later_logs {
            text.push_str(&format!("; deletes the later log {}", later.display()));
        }
        text
    }
}

/// Finds the first bad record in the logs of `dir` (already locked by the
/// caller); `None` when every log reads cleanly. When `confirm(&plan)`
/// agrees, truncates there and deletes later logs. A damaged snapshot is
/// an error: it is written whole or not at all, so damage in it is not
/// something a cut can fix.
pub fn repair(dir: &Path, confirm: impl FnOnce(&RepairPlan) -> bool) -> Result<Option<RepairPlan>> {
    let mut engine = Engine::new(crate::engine::EngineConfig::default());
    let (snapshot_gen, _, _) = load_snapshot(dir, &mut engine)?;
    let live = live_logs(dir, snapshot_gen)?;
    let mut records_kept = 0;
    for (i, &gen) in live.iter().enumerate() {
        let path = log_path(dir, gen);
        let scan = scan_log(&path, gen, &mut engine)?;
        records_kept += scan.records;
        let Some(damage) = scan.damage else { continue };
        let mut plan = RepairPlan {
            file: path.clone(),
            offset: damage.offset,
            file_len: fs::metadata(&path)?.len(),
            reason: damage.torn.unwrap_or(damage.reason),
            records_kept,
            later_logs: live[i + 1..].iter().map(|&g| log_path(dir, g)).collect(),
            applied: false,
        };
        if !confirm(&plan) {
            return Ok(Some(plan));
        }
        for later in &plan.later_logs {
            fs::remove_file(later)?;
        }
        if plan.offset < LOG_HEADER as u64 {
            // Not even a header left: recovery continues from the previous
            // generation or creates this one afresh.
            fs::remove_file(&path)?;
        } else {
            let file = OpenOptions::new().write(true).open(&path)?;
            file.set_len(plan.offset)?;
            file.sync_all()?;
        }
        super::log::sync_dir(dir)?;
        plan.applied = true;
        return Ok(Some(plan));
    }
    Ok(None)
}

/// Reads `path` frame by frame in bounded chunks (a log can be hundreds of
/// megabytes; a compaction running beside the server must not hold it all
/// at once), after checking that it starts with `prefix`. Every frame must
/// be whole: these files are complete and fsync'd, so a partial or damaged
/// frame is corruption.
fn for_each_frame(path: &Path, prefix: &[u8], mut each: impl FnMut(Record) -> Result<()>) -> Result<()> {
    use std::io::Read;
    const CHUNK: usize = 4 << 20;
    let mut file = fs::File::open(path)?;
    let mut buf = vec![0u8; prefix.len()];
    file.read_exact(&mut buf).map_err(|_| corrupt(path, 0, "header missing"))?;
    if buf != prefix {
        return Err(corrupt(path, 0, "bad header"));
    }
    let mut offset = prefix.len() as u64;
    buf.clear();
    let mut start = 0;
    let mut eof = false;
    loop {
        match read_frame(&buf[start..]) {
            Ok((record, used)) => {
                each(record)?;
                start += used;
                offset += used as u64;
            }
            Err(FrameError::Incomplete) if !eof => {
                buf.drain(..start);
                start = 0;
                let len = buf.len();
                buf.resize(len + CHUNK, 0);
                let n = file.read(&mut buf[len..])?;
                buf.truncate(len + n);
                eof = n == 0;
            }
            Err(_) if eof && start == buf.len() => return Ok(()),
            Err(e) => return Err(corrupt(path, offset, format!("{e:?} in a file a compaction reads"))),
        }
    }
}

/// For a compaction, without touching the files: rebuilds in `engine` the
/// state that the snapshot plus every log generation before `before_gen`
/// hold, which is the live engine's state when appends switched to
/// `before_gen`. Read-only: the running server appends to `before_gen`,
/// and recovery, not this, owns deleting and truncating. Returns the
/// snapshot's next fence.
///
/// Jobs finished before `prune_at` minus the retention are forgotten as
/// the replay goes (every 64Ki records), so the private engine stays near
/// the live state's size instead of holding every job the logs ever
/// finished. Pruning early is the same as pruning at the end: nothing in a
/// log refers to a finished job again except a new `Pushed` of its id,
/// which replaces it anyway.
pub fn rebuild(dir: &Path, before_gen: u64, prune_at: u64, engine: &mut Engine) -> Result<u64> {
    let path = dir.join(SNAPSHOT_FILE);
    let (mut snapshot_gen, mut next_fence) = (1, 1);
    if path.exists() {
        let (mut meta, mut jobs, mut ended) = (None, 0u64, false);
        for_each_frame(&path, SNAPSHOT_MAGIC, |record| {
            match record {
                Record::Meta { next_fence, log_gen } if meta.is_none() => meta = Some((log_gen, next_fence)),
                Record::Job(image) if meta.is_some() && !ended => {
                    engine.import(image);
                    jobs += 1;
                }
                Record::End { jobs: expected } if expected == jobs && !ended => ended = true,
                other => return Err(corrupt(&path, 0, format!("unexpected record {other:?}"))),
            }
            Ok(())
        })?;
        let Some((gen, fence)) = meta.filter(|_| ended) else {
            return Err(corrupt(&path, 0, "snapshot without meta or end record"));
        };
        (snapshot_gen, next_fence) = (gen, fence);
    }
    for gen in log_generations(dir)?.into_iter().filter(|&g| g >= snapshot_gen && g < before_gen) {
        let path = log_path(dir, gen);
        let mut records = 0u64;
        for_each_frame(&path, &log_header(gen), |record| match record {
            Record::Event(event) => {
                engine.apply(event);
                records += 1;
                if records.is_multiple_of(1 << 16) {
                    engine.prune(prune_at);
                }
                Ok(())
            }
            other => Err(corrupt(&path, 0, format!("unexpected record {other:?}"))),
        })?;
    }
    engine.prune(prune_at);
    Ok(next_fence)
}
