//! Snapshot files: every retained job, written so that a crash at any
//! moment leaves either the old snapshot or the new one, never a mix.
//!
//! Steps: write `snapshot.tmp` (magic, meta, jobs, end record), fsync it,
//! rename it over `snapshot`, fsync the directory. The meta record names
//! the log generation that continues the snapshot; recovery ignores (and
//! deletes) older logs, so records already in the snapshot are never
//! replayed twice.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::Path;

use super::log::sync_dir;
use super::record::{encode_end, encode_job, encode_meta};
use crate::engine::JobImage;
use crate::error::Result;

pub const SNAPSHOT_FILE: &str = "snapshot";
pub const SNAPSHOT_TMP: &str = "snapshot.tmp";
pub const SNAPSHOT_MAGIC: &[u8; 12] = b"SOLIDSNAP\x00\x00\x01";

/// Writes the snapshot; returns its size in bytes.
pub fn write_snapshot(dir: &Path, log_gen: u64, next_fence: u64, jobs: &[JobImage]) -> Result<u64> {
    let tmp = dir.join(SNAPSHOT_TMP);
    let file = File::create(&tmp)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut buf = Vec::with_capacity(64 << 10);
    buf.extend_from_slice(SNAPSHOT_MAGIC);
    encode_meta(&mut buf, next_fence, log_gen);
    let mut size = 0u64;
    for job in jobs {
        encode_job(&mut buf, job);
        if buf.len() >= 64 << 10 {
            out.write_all(&buf)?;
            size += buf.len() as u64;
            buf.clear();
        }
    }
    encode_end(&mut buf, jobs.len() as u64);
    out.write_all(&buf)?;
    size += buf.len() as u64;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    fs::rename(&tmp, dir.join(SNAPSHOT_FILE))?;
    sync_dir(dir)?;
    Ok(size)
}
