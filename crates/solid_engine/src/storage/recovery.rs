//! Reading the data directory back: the snapshot, then the logs after it.
//!
//! Rules (see docs/protocol.md, "Durability"):
//! - The snapshot is written to a temp file, fsync'd and renamed, so it is
//!   either absent or complete; any damage in it is corruption (an error).
//! - Logs older than the snapshot's generation are already contained in it
//!   and are deleted.
//! - In the newest log, a damaged *last* record (partial write, or CRC
//!   mismatch on the record that ends the file, or a zero-filled tail) is a
//!   write that never completed: it is truncated away and reported. Damage
//!   followed by more data is corruption: an error naming file and offset.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use super::log::{log_path, LOG_HEADER, LOG_MAGIC};
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

/// Outcome of scanning one log file.
struct Scan {
    records: u64,
    valid_len: u64,
    torn: bool,
}

fn replay_log(path: &Path, gen: u64, is_last: bool, engine: &mut Engine) -> Result<Scan> {
    let data = fs::read(path)?;
    if data.len() < LOG_HEADER {
        if is_last {
            // Created but the header never fully reached the disk.
            return Ok(Scan { records: 0, valid_len: 0, torn: true });
        }
        return Err(corrupt(path, 0, "log header missing"));
    }
    let header_gen = u64::from_le_bytes(data[12..20].try_into().expect("8 bytes"));
    if &data[..8] != LOG_MAGIC || header_gen != gen {
        return Err(corrupt(path, 0, "bad log header"));
    }
    let mut pos = LOG_HEADER;
    let mut records = 0;
    while pos < data.len() {
        let rest = &data[pos..];
        let tail = match read_frame(rest) {
            Ok((Record::Event(event), used)) => {
                engine.apply(event);
                records += 1;
                pos += used;
                continue;
            }
            Ok((other, _)) => return Err(corrupt(path, pos as u64, format!("unexpected record {other:?}"))),
            Err(FrameError::Incomplete) => true,
            Err(FrameError::BadLength) => rest.iter().all(|&b| b == 0),
            Err(FrameError::Checksum) => {
                let len = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
                FRAME_HEADER + len == rest.len()
            }
            Err(FrameError::BadBody) => false,
        };
        if !tail || !is_last {
            return Err(corrupt(path, pos as u64, "damaged record followed by more data"));
        }
        return Ok(Scan { records, valid_len: pos as u64, torn: true });
    }
    Ok(Scan { records, valid_len: data.len() as u64, torn: false })
}

/// Rebuilds `engine` from `dir`; truncates a torn tail; deletes logs the
/// snapshot supersedes. Leaves a valid log file to continue writing.
pub fn recover(dir: &Path, engine: &mut Engine) -> Result<RecoveryReport> {
    let (snapshot_gen, next_fence, snapshot_jobs) = load_snapshot(dir, engine)?;
    engine.raise_fence_floor(next_fence);
    let mut report = RecoveryReport { snapshot_jobs, log_gen: snapshot_gen, ..Default::default() };
    let gens = log_generations(dir)?;
    let mut live: Vec<u64> = Vec::new();
    for gen in gens {
        if gen < snapshot_gen {
            fs::remove_file(log_path(dir, gen))?;
        } else {
            live.push(gen);
        }
    }
    for (i, &gen) in live.iter().enumerate() {
        let path: PathBuf = log_path(dir, gen);
        let is_last = i + 1 == live.len();
        let scan = replay_log(&path, gen, is_last, engine)?;
        report.log_records += scan.records;
        report.logs_replayed += 1;
        if scan.torn {
            let full = fs::metadata(&path)?.len();
            let keep = scan.valid_len;
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
