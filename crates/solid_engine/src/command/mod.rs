//! Requests: a RESP frame becomes a typed [`Command`], or an error.
//!
//! Only syntax lives here (names, arity, integer ranges, job id format):
//! no engine state is read or changed. Errors follow the protocol rules:
//! a frame that is not an array of bulk strings is `PROTO` (the server
//! closes the connection); an unknown name is `UNKNOWN`; everything else
//! is `ERR` and the connection stays open.

mod reply;

#[cfg(test)]
mod tests;

pub use reply::{stats_text, CompactionStats, Reply};

use crate::engine::{JobId, Payload};
use crate::error::Error;
use crate::presence::{Presence, MAX_TTL_MS};
use crate::resp::Frame;

/// Largest `count` FETCH and DEAD accept.
pub const MAX_COUNT: u64 = 100_000;
/// `DEAD` without a count.
pub const DEFAULT_DEAD_COUNT: usize = 100;

/// When a pushed job is due, on the server's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// `AT <due_ms>`: a time since the epoch (0, or a time not in the
    /// future: ready at once).
    At(u64),
    /// `IN <delay_ms>`: that long after the server receives the push. What a
    /// client sends, so that its own clock, however skewed, plays no part
    /// (docs/reliability.md, "Clocks").
    In(u64),
}

impl Due {
    /// The due time on the server's clock, `now_ms` being its now.
    pub fn at(self, now_ms: u64) -> u64 {
        match self {
            Due::At(ms) => ms,
            Due::In(delay) => crate::engine::time_after(now_ms, delay),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Ping(Option<Vec<u8>>),
    Auth(Vec<u8>),
    /// `CLIENT ...` (SETINFO, SETNAME, ...): accepted and ignored, for clients' handshakes.
    Client,
    /// `SELECT 0`: the only database.
    Select,
    /// `HELLO [2|3] [AUTH <username> <password>] [SETNAME <name>]`: the
    /// handshake of RESP3-era clients; the protocol version for the rest of
    /// the connection (None: unchanged), and a password to authenticate with.
    Hello {
        proto: Option<u8>,
        auth: Option<Vec<u8>>,
    },
    Quit,
    Push {
        channel: u32,
        id: JobId,
        payload: Payload,
        due: Option<Due>,
    },
    PushMany {
        channel: u32,
        due: Due,
        jobs: Vec<(JobId, Payload)>,
    },
    Fetch {
        count: usize,
        lease_ms: u64,
        block_ms: u64,
        channels: Vec<u32>,
    },
    Ack {
        id: JobId,
        fence: u64,
    },
    AckMany(Vec<(JobId, u64)>),
    Retry {
        id: JobId,
        fence: u64,
        delay_ms: u64,
    },
    Fail {
        id: JobId,
        fence: u64,
        reason: Payload,
    },
    Extend {
        id: JobId,
        fence: u64,
        lease_ms: u64,
    },
    Release {
        id: JobId,
        fence: u64,
    },
    ReleaseMany(Vec<(JobId, u64)>),
    Get(JobId),
    Cancel(JobId),
    Dead(usize),
    Stats,
    /// `CHANNELS [<channel_id> ...]`: per-channel counts (all channels with
    /// a live job when none is named).
    Channels(Vec<u32>),
    /// `NODE <node_id> <ttl_ms> <description>`: a worker node's presence
    /// (see [`crate::presence`]); a TTL of 0 removes it.
    Node {
        node_id: Vec<u8>,
        ttl_ms: u64,
        description: Vec<u8>,
    },
    /// `NODES`: the live nodes.
    Nodes,
    /// Test-only: panics inside the connection's handler.
    #[cfg(test)]
    DebugPanic,
}

impl Command {
    /// Commands allowed before AUTH when a password is configured.
    pub fn allowed_without_auth(&self) -> bool {
        matches!(
            self,
            Command::Auth(_)
                | Command::Hello { .. }
                | Command::Ping(_)
                | Command::Client
                | Command::Select
                | Command::Quit
        )
    }
}

/// The arguments of one request, with typed accessors that produce the
/// protocol's error messages.
struct Args {
    name: &'static str,
    items: std::vec::IntoIter<Vec<u8>>,
}

fn arity(name: &str) -> Error {
    Error::Invalid(format!("wrong number of arguments for '{}'", name.to_ascii_lowercase()))
}

impl Args {
    fn next(&mut self) -> Result<Vec<u8>, Error> {
        self.items.next().ok_or_else(|| arity(self.name))
    }

    fn remaining(&self) -> usize {
        self.items.len()
    }

    fn done(&self) -> Result<(), Error> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(arity(self.name))
        }
    }

    fn uint(&mut self, what: &str, max: u64) -> Result<u64, Error> {
        let raw = self.next()?;
        parse_uint(&raw)
            .filter(|&v| v <= max)
            .ok_or_else(|| Error::Invalid(format!("{what} must be an integer in 0..={max}, got '{}'", printable(&raw))))
    }

    fn u64(&mut self, what: &str) -> Result<u64, Error> {
        self.uint(what, i64::MAX as u64)
    }

    fn channel(&mut self) -> Result<u32, Error> {
        Ok(self.uint("channel_id", u64::from(u32::MAX))? as u32)
    }

    fn id(&mut self) -> Result<JobId, Error> {
        let raw = self.next()?;
        JobId::parse(&raw).ok_or_else(|| Error::Invalid(format!("invalid job id '{}'", printable(&raw))))
    }

    fn payload(&mut self) -> Result<Payload, Error> {
        Ok(Payload::from(self.next()?))
    }

    /// `<job_id> <fence> [<job_id> <fence> ...]`: at least one pair.
    fn fence_pairs(&mut self) -> Result<Vec<(JobId, u64)>, Error> {
        if self.remaining() == 0 || !self.remaining().is_multiple_of(2) {
            return Err(arity(self.name));
        }
        let mut pairs = Vec::with_capacity(self.remaining() / 2);
        while self.remaining() > 0 {
            pairs.push((self.id()?, self.u64("fence")?));
        }
        Ok(pairs)
    }
}

/// Plain decimal, no sign, no spaces.
fn parse_uint(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() || raw.len() > 20 || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// Client text echoed in an error: bounded and on one line.
fn printable(raw: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(&raw[..raw.len().min(64)])
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    text
}

/// HTTP methods that are no command here: a request line starting with one
/// is a browser or curl talking to the wrong port.
const HTTP_METHODS: &[&str] = &["POST", "PUT", "HEAD", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"];

/// An HTTP request line (`POST ...`, `GET /path HTTP/1.1`) or a `Host:`
/// header, the lines Redis also refuses. Closing at the first of them is
/// what keeps a request body (`curl -X POST --data 'PUSH ...'`) from being
/// run: commands execute in order, and the body comes after both.
fn is_http(name: &[u8], args: &[Vec<u8>]) -> bool {
    name.eq_ignore_ascii_case(b"HOST:")
        || HTTP_METHODS.iter().any(|m| m.as_bytes().eq_ignore_ascii_case(name))
        || (name.eq_ignore_ascii_case(b"GET") && args.last().is_some_and(|a| a.starts_with(b"HTTP/")))
}

#[rustfmt::skip]
const NAMES: &[&str] = &[
    "PING", "AUTH", "HELLO", "CLIENT", "SELECT", "QUIT", "PUSH", "PUSHMANY", "FETCH", "ACK", "ACKMANY", "RETRY", "FAIL",
    "EXTEND", "RELEASE", "RELEASEMANY", "GET", "CANCEL", "DEAD", "STATS", "INFO", "CHANNELS", "NODE",
    "NODES",
    "DEBUG",
];

/// Parses one request frame.
pub fn parse(frame: Frame) -> Result<Command, Error> {
    let Frame::Array(items) = frame else {
        return Err(Error::Proto("expected an array of bulk strings".into()));
    };
    let mut raw = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Frame::Bulk(bytes) => raw.push(bytes),
            _ => return Err(Error::Proto("expected an array of bulk strings".into())),
        }
    }
    if raw.first().is_some_and(|name| is_http(name, &raw[1..])) {
        return Err(Error::CrossProtocol);
    }
    let mut iter = raw.into_iter();
    let Some(name_raw) = iter.next() else { return Err(Error::Invalid("empty command".into())) };
    let Some(&name) = NAMES.iter().find(|n| n.as_bytes().eq_ignore_ascii_case(&name_raw)) else {
        return Err(Error::UnknownCommand(printable(&name_raw)));
    };
    let mut a = Args { name, items: iter };
    let command = match name {
        "PING" => match a.remaining() {
            0 => Command::Ping(None),
            1 => Command::Ping(Some(a.next()?)),
            _ => return Err(arity(name)),
        },
        // `AUTH [username] password`: clients may send the username form.
        "AUTH" => match a.remaining() {
            1 => Command::Auth(a.next()?),
            2 => {
                a.next()?;
                Command::Auth(a.next()?)
            }
            _ => return Err(arity(name)),
        },
        "HELLO" => {
            let proto = match a.remaining() {
                0 => None,
                _ => {
                    let raw = a.next()?;
                    match parse_uint(&raw) {
                        Some(v @ 2..=3) => Some(v as u8),
                        Some(_) => return Err(Error::NoProto),
                        None => return Err(Error::Invalid("protocol version is not an integer".into())),
                    }
                }
            };
            let mut auth = None;
            while a.remaining() > 0 {
                let option = a.next()?;
                if option.eq_ignore_ascii_case(b"AUTH") {
                    a.next()?; // the username: there is only one user
                    auth = Some(a.next()?);
                } else if option.eq_ignore_ascii_case(b"SETNAME") {
                    a.next()?; // names are not kept
                } else {
                    return Err(Error::Invalid(format!("syntax error in HELLO option '{}'", printable(&option))));
                }
            }
            Command::Hello { proto, auth }
        }
        "CLIENT" => {
            a.next()?;
            return Ok(Command::Client);
        }
        "SELECT" => {
            if a.uint("database", i64::MAX as u64)? != 0 {
                return Err(Error::Invalid("only database 0 exists".into()));
            }
            Command::Select
        }
        "QUIT" => Command::Quit,
        "PUSH" => {
            let channel = a.channel()?;
            let id = a.id()?;
            let payload = a.payload()?;
            let due = match a.remaining() {
                0 => None,
                2 => {
                    let word = a.next()?;
                    if word.eq_ignore_ascii_case(b"AT") {
                        Some(Due::At(a.u64("due_ms")?))
                    } else if word.eq_ignore_ascii_case(b"IN") {
                        Some(Due::In(a.u64("delay_ms")?))
                    } else {
                        return Err(Error::Invalid(format!("expected AT or IN, got '{}'", printable(&word))));
                    }
                }
                _ => return Err(arity(name)),
            };
            Command::Push { channel, id, payload, due }
        }
        "PUSHMANY" => {
            let channel = a.channel()?;
            // `<due_ms or 0>`, or `IN <delay_ms>`.
            let first = a.next()?;
            let due = if first.eq_ignore_ascii_case(b"IN") {
                Due::In(a.u64("delay_ms")?)
            } else {
                Due::At(parse_uint(&first).filter(|&v| v <= i64::MAX as u64).ok_or_else(|| {
                    Error::Invalid(format!(
                        "due_ms must be an integer in 0..={}, got '{}'",
                        i64::MAX,
                        printable(&first)
                    ))
                })?)
            };
            if a.remaining() == 0 || !a.remaining().is_multiple_of(2) {
                return Err(arity(name));
            }
            let mut jobs = Vec::with_capacity(a.remaining() / 2);
            while a.remaining() > 0 {
                jobs.push((a.id()?, a.payload()?));
            }
            Command::PushMany { channel, due, jobs }
        }
        "FETCH" => {
            let count = a.uint("count", MAX_COUNT)? as usize;
            if count == 0 {
                return Err(Error::Invalid("count must be at least 1".into()));
            }
            let lease_ms = a.u64("lease_ms")?;
            let block_ms = a.u64("block_ms")?;
            if a.remaining() == 0 {
                return Err(arity(name));
            }
            let mut channels = Vec::with_capacity(a.remaining());
            while a.remaining() > 0 {
                channels.push(a.channel()?);
            }
            Command::Fetch { count, lease_ms, block_ms, channels }
        }
        "ACK" => Command::Ack { id: a.id()?, fence: a.u64("fence")? },
        "ACKMANY" => Command::AckMany(a.fence_pairs()?),
        "RETRY" => Command::Retry { id: a.id()?, fence: a.u64("fence")?, delay_ms: a.u64("delay_ms")? },
        "FAIL" => {
            let id = a.id()?;
            let fence = a.u64("fence")?;
            let reason = if a.remaining() > 0 { a.payload()? } else { Payload::from(&b""[..]) };
            Command::Fail { id, fence, reason }
        }
        "EXTEND" => Command::Extend { id: a.id()?, fence: a.u64("fence")?, lease_ms: a.u64("lease_ms")? },
        "RELEASE" => Command::Release { id: a.id()?, fence: a.u64("fence")? },
        "RELEASEMANY" => Command::ReleaseMany(a.fence_pairs()?),
        "GET" => Command::Get(a.id()?),
        "CANCEL" => Command::Cancel(a.id()?),
        "DEAD" => match a.remaining() {
            0 => Command::Dead(DEFAULT_DEAD_COUNT),
            _ => Command::Dead(a.uint("count", MAX_COUNT)? as usize),
        },
        // INFO may carry a section name (redis-cli sends one): ignored.
        "STATS" | "INFO" => {
            while a.remaining() > 0 {
                a.next()?;
            }
            Command::Stats
        }
        "NODE" => {
            let node_id = a.next()?;
            if !Presence::valid_id(&node_id) {
                return Err(Error::Invalid(format!(
                    "invalid node id '{}' (1..=128 of A-Z a-z 0-9 _ . : -)",
                    printable(&node_id)
                )));
            }
            let ttl_ms = a.uint("ttl_ms", MAX_TTL_MS)?;
            Command::Node { node_id, ttl_ms, description: a.next()? }
        }
        "NODES" => Command::Nodes,
        "CHANNELS" => {
            if a.remaining() as u64 > MAX_COUNT {
                return Err(Error::Invalid(format!("at most {MAX_COUNT} channels")));
            }
            let mut channels = Vec::with_capacity(a.remaining());
            while a.remaining() > 0 {
                channels.push(a.channel()?);
            }
            Command::Channels(channels)
        }
        "DEBUG" => return debug(a),
        _ => unreachable!("every name in NAMES is handled"),
    };
    a.done()?;
    Ok(command)
}

#[cfg(test)]
fn debug(mut a: Args) -> Result<Command, Error> {
    if a.next()?.eq_ignore_ascii_case(b"PANIC") {
        return Ok(Command::DebugPanic);
    }
    Err(Error::UnknownCommand("DEBUG".into()))
}

#[cfg(not(test))]
fn debug(_: Args) -> Result<Command, Error> {
    Err(Error::UnknownCommand("DEBUG".into()))
}
