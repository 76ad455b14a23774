//! On-disk records.
//!
//! Every record is framed as `len: u32 LE | crc32: u32 LE | type: u8 | body`,
//! where `len` counts `type + body` and the CRC covers the same bytes. The
//! frame lets recovery tell a torn tail (the record runs past the end of
//! the file, or is the last one and fails its CRC) from corruption in the
//! middle (a bad record followed by more data).
//!
//! Integers are little-endian; a job id is its 16-byte UUID value.

use crate::engine::{Event, JobId, JobImage, Payload, State};

pub const FRAME_HEADER: usize = 8;
/// No record is larger than the biggest payload plus some fields.
pub const MAX_RECORD: usize = crate::resp::MAX_BULK_LEN * 2 + 1024;

const PUSH: u8 = 1;
const RESERVE: u8 = 2;
const ACK: u8 = 3;
const RETRY: u8 = 4;
const FAIL: u8 = 5;
const CANCEL: u8 = 6;
const RELEASE: u8 = 7;
const PROMOTE: u8 = 8;
const EXPIRE: u8 = 9;
const SNAP_META: u8 = 10;
const SNAP_JOB: u8 = 11;
const SNAP_END: u8 = 12;

/// A decoded record body.
#[derive(Debug, PartialEq, Eq)]
pub enum Record {
    Event(Event),
    /// Snapshot header: the fence counter and the log generation that
    /// continues the snapshot.
    Meta {
        next_fence: u64,
        log_gen: u64,
    },
    Job(JobImage),
    /// Snapshot trailer: how many jobs it holds (proves it is complete).
    End {
        jobs: u64,
    },
}

/// Appends one framed record, built by `body` after the type byte.
fn frame(out: &mut Vec<u8>, kind: u8, body: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER]);
    out.push(kind);
    body(out);
    let len = (out.len() - start - FRAME_HEADER) as u32;
    let crc = crc32fast::hash(&out[start + FRAME_HEADER..]);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

fn put_id(out: &mut Vec<u8>, id: JobId) {
    out.extend_from_slice(&id.0.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub fn encode_event(out: &mut Vec<u8>, event: &Event) {
    match event {
        Event::Pushed { id, channel, due_ms, payload } => frame(out, PUSH, |o| {
            put_id(o, *id);
            put_u32(o, *channel);
            put_u64(o, *due_ms);
            o.extend_from_slice(payload);
        }),
        Event::Reserved { id, fence } => frame(out, RESERVE, |o| {
            put_id(o, *id);
            put_u64(o, *fence);
        }),
        Event::Acked { id, at_ms } => frame(out, ACK, |o| {
            put_id(o, *id);
            put_u64(o, *at_ms);
        }),
        Event::Retried { id, due_ms } => frame(out, RETRY, |o| {
            put_id(o, *id);
            put_u64(o, *due_ms);
        }),
        Event::Failed { id, at_ms, reason } => frame(out, FAIL, |o| {
            put_id(o, *id);
            put_u64(o, *at_ms);
            o.extend_from_slice(reason);
        }),
        Event::Cancelled { id, at_ms } => frame(out, CANCEL, |o| {
            put_id(o, *id);
            put_u64(o, *at_ms);
        }),
        Event::Released { id } => frame(out, RELEASE, |o| put_id(o, *id)),
        Event::Promoted { id } => frame(out, PROMOTE, |o| put_id(o, *id)),
        Event::Expired { id } => frame(out, EXPIRE, |o| put_id(o, *id)),
    }
}

pub fn encode_meta(out: &mut Vec<u8>, next_fence: u64, log_gen: u64) {
    frame(out, SNAP_META, |o| {
        put_u64(o, next_fence);
        put_u64(o, log_gen);
    });
}

pub fn encode_job(out: &mut Vec<u8>, job: &JobImage) {
    frame(out, SNAP_JOB, |o| {
        put_id(o, job.id);
        put_u32(o, job.channel);
        o.push(job.state.code());
        put_u32(o, job.attempts);
        put_u64(o, job.time_ms);
        put_u32(o, job.reason.len() as u32);
        o.extend_from_slice(&job.reason);
        o.extend_from_slice(&job.payload);
    });
}

pub fn encode_end(out: &mut Vec<u8>, jobs: u64) {
    frame(out, SNAP_END, |o| put_u64(o, jobs));
}

/// Why a frame could not be read at some offset.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The file ends inside this record: a partial write.
    Incomplete,
    /// The checksum does not match.
    Checksum,
    /// The length field is impossible (zero or too large).
    BadLength,
    /// The checksum matches but the body does not decode.
    BadBody,
}

/// Reads the frame at the start of `buf`: the record and its total length.
pub fn read_frame(buf: &[u8]) -> Result<(Record, usize), FrameError> {
    if buf.len() < FRAME_HEADER {
        return Err(FrameError::Incomplete);
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    if len == 0 || len > MAX_RECORD {
        return Err(FrameError::BadLength);
    }
    let Some(body) = buf.get(FRAME_HEADER..FRAME_HEADER + len) else { return Err(FrameError::Incomplete) };
    if crc32fast::hash(body) != crc {
        return Err(FrameError::Checksum);
    }
    let record = decode_body(body).ok_or(FrameError::BadBody)?;
    Ok((record, FRAME_HEADER + len))
}

/// A cursor over a record body; every read is bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn id(&mut self) -> Option<JobId> {
        Some(JobId(u128::from_le_bytes(self.take(16)?.try_into().ok()?)))
    }
    fn rest(&mut self) -> Payload {
        Payload::from(std::mem::take(&mut self.0))
    }
    fn end(&self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

fn decode_body(body: &[u8]) -> Option<Record> {
    let mut r = Reader(body);
    let record = match r.u8()? {
        PUSH => {
            let (id, channel, due_ms) = (r.id()?, r.u32()?, r.u64()?);
            Record::Event(Event::Pushed { id, channel, due_ms, payload: r.rest() })
        }
        RESERVE => Record::Event(Event::Reserved { id: r.id()?, fence: r.u64()? }),
        ACK => Record::Event(Event::Acked { id: r.id()?, at_ms: r.u64()? }),
        RETRY => Record::Event(Event::Retried { id: r.id()?, due_ms: r.u64()? }),
        FAIL => {
            let (id, at_ms) = (r.id()?, r.u64()?);
            Record::Event(Event::Failed { id, at_ms, reason: r.rest() })
        }
        CANCEL => Record::Event(Event::Cancelled { id: r.id()?, at_ms: r.u64()? }),
        RELEASE => Record::Event(Event::Released { id: r.id()? }),
        PROMOTE => Record::Event(Event::Promoted { id: r.id()? }),
        EXPIRE => Record::Event(Event::Expired { id: r.id()? }),
        SNAP_META => Record::Meta { next_fence: r.u64()?, log_gen: r.u64()? },
        SNAP_JOB => {
            let id = r.id()?;
            let channel = r.u32()?;
            let state = State::from_code(r.u8()?)?;
            let attempts = r.u32()?;
            let time_ms = r.u64()?;
            let reason_len = r.u32()? as usize;
            let reason = Payload::from(r.take(reason_len)?);
            Record::Job(JobImage { id, channel, state, attempts, time_ms, reason, payload: r.rest() })
        }
        SNAP_END => Record::End { jobs: r.u64()? },
        _ => return None,
    };
    r.end()?;
    Some(record)
}
