//! A client for SolidEngine's RESP protocol (docs/protocol.md), on the
//! `redis` crate's connection: one typed method per command, nothing else.
//! Connections come from the same checkout pool as the Redis backend's.

use std::time::Duration;

use redis::{Connection, Value};

use crate::claim::MAX_BATCH;
use crate::error::{Error, Result};
use crate::redact::redact;
use crate::redis::connection::{Connector, Timeouts};

/// `unix:///path.sock` or `tcp://host:port`, as users write them, to the
/// URL forms the redis crate opens (`redis+unix://`, `redis://`). A password
/// is sent with AUTH on connect.
pub fn connector(url: &str, password: Option<&str>, timeouts: Timeouts) -> Result<Connector> {
    let auth = password.map(|p| format!(":{}@", urlencode(p))).unwrap_or_default();
    let converted = if let Some(path) = url.strip_prefix("unix://") {
        let pass = password.map(|p| format!("?pass={}", urlencode(p))).unwrap_or_default();
        format!("redis+unix://{path}{pass}")
    } else if let Some(addr) = url.strip_prefix("tcp://") {
        format!("redis://{auth}{addr}")
    } else {
        return Err(Error::Invalid(redact(&format!(
            "invalid SolidEngine URL {url:?}: use unix:///path/to.sock or tcp://host:port"
        ))));
    };
    timeouts.validate()?;
    let connector = Connector::with_timeouts(&converted, timeouts)
        .map_err(|_| Error::Invalid(redact(&format!("invalid SolidEngine URL {url:?}"))))?;
    Ok(connector.for_engine(url))
}

/// Whether `id` can name a job on the engine, which accepts only the
/// 36-character hyphenated UUID form (as every SolidJobs id is). Any other
/// id names no job: GET and CANCEL answer "unknown" for it without asking
/// (callers holding a pool check first, so not even a connection is made),
/// as the Redis backend does, instead of an engine syntax error.
pub fn is_job_id(id: &str) -> bool {
    id.len() == 36 && uuid::Uuid::try_parse(id).is_ok()
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// One reservation from FETCH.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub job_id: String,
    pub channel_id: u32,
    pub fence: u64,
    pub attempts: u32,
    pub payload: Vec<u8>,
}

/// A job as GET reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    pub id: String,
    pub channel_id: u32,
    pub state: String,
    pub attempts: u32,
    pub payload: Vec<u8>,
    pub due_ms: Option<u64>,
}

/// Maps a STALE reply to `Error::StaleClaim(fence)`.
fn fenced(out: redis::RedisResult<Value>, fence: u64) -> Result<()> {
    match out {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("STALE") || e.code() == Some("NOTFOUND") => Err(Error::StaleClaim(fence)),
        Err(e) => Err(e.into()),
    }
}

/// Pushes one job, ready now or after `delay`. The delay is sent as such
/// (`IN`), never as a time on this process's clock: the server adds it to
/// its own, so a skewed clock here does not move the due time.
pub fn push(
    c: &mut Connection,
    channel_id: u32,
    job_id: &str,
    payload: &[u8],
    delay: Option<Duration>,
) -> Result<bool> {
    let mut cmd = redis::cmd("PUSH");
    cmd.arg(channel_id).arg(job_id).arg(payload);
    if let Some(delay) = delay {
        cmd.arg("IN").arg(delay.as_millis() as u64);
    }
    let created: i64 = cmd.query(c)?;
    Ok(created == 1)
}

/// Pushes `(id, payload)` pairs to one channel, ready now or after `delay`
/// (sent as a delay, as by `push`); returns how many were new.
pub fn push_many(
    c: &mut Connection,
    channel_id: u32,
    delay: Option<Duration>,
    jobs: &[(String, Vec<u8>)],
) -> Result<u64> {
    let mut total = 0;
    for chunk in jobs.chunks(MAX_BATCH) {
        let mut cmd = redis::cmd("PUSHMANY");
        cmd.arg(channel_id);
        match delay {
            Some(delay) => cmd.arg("IN").arg(delay.as_millis() as u64),
            None => cmd.arg(0),
        };
        for (id, payload) in chunk {
            cmd.arg(id).arg(payload.as_slice());
        }
        let n: u64 = cmd.query(c)?;
        total += n;
    }
    Ok(total)
}

pub fn fetch(
    c: &mut Connection,
    count: usize,
    lease_ms: u64,
    block_ms: u64,
    channel_ids: &[u32],
) -> Result<Vec<Reservation>> {
    let mut cmd = redis::cmd("FETCH");
    cmd.arg(count).arg(lease_ms).arg(block_ms);
    for id in channel_ids {
        cmd.arg(*id);
    }
    let rows: Vec<(String, u32, u64, u32, Vec<u8>)> = cmd.query(c)?;
    Ok(rows
        .into_iter()
        .map(|(job_id, channel_id, fence, attempts, payload)| Reservation {
            job_id,
            channel_id,
            fence,
            attempts,
            payload,
        })
        .collect())
}

/// Acks `(id, fence)` pairs; returns the fences that were stale. A pair the
/// engine reports as acked already under the same fence (2: this batch was
/// resent after its reply was lost, and the first attempt applied) is not
/// stale.
pub fn ack_many(c: &mut Connection, done: &[(String, u64)]) -> Result<Vec<u64>> {
    let mut stale = Vec::new();
    for chunk in done.chunks(MAX_BATCH) {
        let mut cmd = redis::cmd("ACKMANY");
        for (id, fence) in chunk {
            cmd.arg(id).arg(*fence);
        }
        let results: Vec<i64> = cmd.query(c)?;
        stale.extend(chunk.iter().zip(results).filter(|(_, r)| *r == 0).map(|((_, f), _)| *f));
    }
    Ok(stale)
}

/// Hands back `(id, fence)` reservations that never reached a task
/// (RELEASEMANY): each job is ready again at the head of its channel with
/// the attempt taken back. Returns how many were released; the others were
/// stale (their lease had already ended) or unknown.
pub fn release_many(c: &mut Connection, held: &[(String, u64)]) -> Result<u64> {
    let mut released = 0;
    for chunk in held.chunks(MAX_BATCH) {
        let mut cmd = redis::cmd("RELEASEMANY");
        for (id, fence) in chunk {
            cmd.arg(id).arg(*fence);
        }
        let results: Vec<i64> = cmd.query(c)?;
        released += results.iter().filter(|r| **r == 1).count() as u64;
    }
    Ok(released)
}

pub fn retry(c: &mut Connection, job_id: &str, fence: u64, delay_ms: u64) -> Result<()> {
    fenced(redis::cmd("RETRY").arg(job_id).arg(fence).arg(delay_ms).query(c), fence)
}

pub fn fail(c: &mut Connection, job_id: &str, fence: u64, reason: &str) -> Result<()> {
    fenced(redis::cmd("FAIL").arg(job_id).arg(fence).arg(reason).query(c), fence)
}

pub fn ack(c: &mut Connection, job_id: &str, fence: u64) -> Result<()> {
    fenced(redis::cmd("ACK").arg(job_id).arg(fence).query(c), fence)
}

pub fn extend(c: &mut Connection, job_id: &str, fence: u64, lease_ms: u64) -> Result<()> {
    fenced(redis::cmd("EXTEND").arg(job_id).arg(fence).arg(lease_ms).query(c), fence)
}

pub fn get(c: &mut Connection, job_id: &str) -> Result<Option<JobInfo>> {
    if !is_job_id(job_id) {
        return Ok(None);
    }
    let row: Option<(String, u32, String, u32, Vec<u8>, i64)> = redis::cmd("GET").arg(job_id).query(c)?;
    Ok(row.map(|(id, channel_id, state, attempts, payload, due)| JobInfo {
        id,
        channel_id,
        state,
        attempts,
        payload,
        due_ms: u64::try_from(due).ok(),
    }))
}

/// The longest `NODE` time to live an engine accepts (solid_engine's
/// `presence::MAX_TTL_MS`).
pub const NODE_TTL_MAX_MS: u64 = 3_600_000;

/// `NODE`: announces this worker node to the engine for `ttl` (0: the
/// node leaves). What a node whose channels are all on SolidEngine has
/// instead of Redis's node key, so dashboards can list it.
pub fn announce(c: &mut Connection, node_id: &str, ttl: Duration, description: &str) -> Result<()> {
    // The engine keeps an entry an hour at most (its MAX_TTL_MS): a longer
    // recovery delay is announced as that, and refreshed every heartbeat.
    let ttl_ms = (ttl.as_millis() as u64).min(NODE_TTL_MAX_MS);
    let _: String = redis::cmd("NODE").arg(node_id).arg(ttl_ms).arg(description).query(c)?;
    Ok(())
}

/// true: cancelled; false: nothing to cancel (unknown, finished or already
/// cancelled); Err(JobRunning) when the job is reserved (BUSY).
pub fn cancel(c: &mut Connection, job_id: &str) -> Result<bool> {
    if !is_job_id(job_id) {
        return Ok(false);
    }
    match redis::cmd("CANCEL").arg(job_id).query::<i64>(c) {
        Ok(n) => Ok(n == 1),
        Err(e) if e.code() == Some("BUSY") => Err(Error::JobRunning(job_id.to_owned())),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = Timeouts::default();
        assert_eq!(connector("unix:///tmp/e.sock", None, t).unwrap().url(), "redis+unix:///tmp/e.sock");
        assert_eq!(
            connector("unix:///tmp/e.sock", Some("p w"), t).unwrap().url(),
            "redis+unix:///tmp/e.sock?pass=p%20w"
        );
        assert_eq!(connector("tcp://127.0.0.1:7777", Some("s3"), t).unwrap().url(), "redis://:s3@127.0.0.1:7777");
        assert!(connector("http://x", None, t).is_err());
    }

    #[test]
    fn connection_errors_name_the_engine_and_its_url_without_the_password() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("tcp://127.0.0.1:{port}");
        let e = connector(&url, Some("hunter2"), Timeouts::default())
            .unwrap()
            .connect()
            .err()
            .expect("nothing listens there");
        let text = e.to_string();
        assert!(e.is_connection(), "{text}");
        assert!(text.starts_with("SolidEngine connection failed: "), "{text}");
        assert!(text.contains(&format!("({url})")), "{text}");
        assert!(!text.contains("hunter2") && !text.contains("Redis") && !text.contains("redis://"), "{text}");
        let e = connector("tcp://:hunter2@127.0.0.1:x", None, Timeouts::default()).err().expect("a bad port");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn only_hyphenated_uuids_can_name_engine_jobs() {
        assert!(is_job_id("6f1c2b7e-0a4d-4f3b-9d2e-1a2b3c4d5e6f"));
        assert!(!is_job_id("nope"));
        assert!(!is_job_id("6f1c2b7e0a4d4f3b9d2e1a2b3c4d5e6f"));
    }
}
