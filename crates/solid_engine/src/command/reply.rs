//! Replies: typed results encoded straight into the connection's output
//! buffer (no intermediate frames for the hot FETCH/ACKMANY replies).

use crate::engine::{ChannelInfo, DeadJob, JobInfo, Reservation, Stats};
use crate::error::Error;
use crate::presence::NodeEntry;
use crate::resp::{write_array_header, write_bulk, write_error, write_int, write_simple};

#[derive(Debug)]
pub enum Reply {
    Ok,
    Pong,
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Error(Error),
    Reservations(Vec<Reservation>),
    Ints(Vec<i64>),
    Job(JobInfo),
    Dead(Vec<DeadJob>),
    Nodes(Vec<NodeEntry>),
    Channels(Vec<ChannelInfo>),
    /// HELLO's answer: the fields clients read (`proto` above all), as a
    /// RESP3 map or, in RESP2, a flat array of pairs.
    Hello {
        resp3: bool,
        id: u64,
    },
}

impl From<Error> for Reply {
    fn from(e: Error) -> Self {
        Reply::Error(e)
    }
}

impl Reply {
    /// Encodes for a connection in RESP3 (`resp3`) or RESP2. Every reply of
    /// this server is valid RESP3 as it is, except the null: `$-1` is RESP2
    /// only, RESP3 spells it `_`.
    pub fn encode_for(&self, out: &mut Vec<u8>, resp3: bool) {
        self.encode_bounded_for(out, resp3, usize::MAX, &mut |_| true);
    }

    /// `encode_bounded` (see there) for a connection in RESP3 or RESP2.
    pub fn encode_bounded_for(
        &self,
        out: &mut Vec<u8>,
        resp3: bool,
        bound: usize,
        drain: &mut dyn FnMut(&mut Vec<u8>) -> bool,
    ) -> bool {
        match self {
            Reply::Nil if resp3 => {
                out.extend_from_slice(b"_\r\n");
                true
            }
            _ => self.encode_bounded(out, bound, drain),
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_bounded(out, usize::MAX, &mut |_| true);
    }

    /// Encodes into `out`, handing it to `drain` (which writes it out and
    /// empties it) between the elements of a list reply whenever it holds
    /// `bound` bytes or more: a FETCH or DEAD reply of many large payloads
    /// never sits whole in memory. `out` then holds at most `bound` plus
    /// one element. Returns false, leaving the rest unencoded, once `drain`
    /// fails (the connection is going away).
    pub fn encode_bounded(&self, out: &mut Vec<u8>, bound: usize, drain: &mut dyn FnMut(&mut Vec<u8>) -> bool) -> bool {
        let mut spill = |out: &mut Vec<u8>| out.len() < bound || drain(out);
        match self {
            Reply::Ok => write_simple(out, "OK"),
            Reply::Pong => write_simple(out, "PONG"),
            Reply::Int(n) => write_int(out, *n),
            Reply::Bulk(b) => write_bulk(out, b),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::Hello { resp3, id } => {
                if *resp3 {
                    out.extend_from_slice(b"%7\r\n");
                } else {
                    write_array_header(out, 14);
                }
                for (key, value) in [("server", "solid-engine"), ("version", env!("CARGO_PKG_VERSION"))] {
                    write_bulk(out, key.as_bytes());
                    write_bulk(out, value.as_bytes());
                }
                write_bulk(out, b"proto");
                write_int(out, if *resp3 { 3 } else { 2 });
                write_bulk(out, b"id");
                write_int(out, *id as i64);
                for (key, value) in [("mode", "standalone"), ("role", "master")] {
                    write_bulk(out, key.as_bytes());
                    write_bulk(out, value.as_bytes());
                }
                write_bulk(out, b"modules");
                write_array_header(out, 0);
            }
            Reply::Error(e) => write_error(out, &e.reply_line()),
            Reply::Reservations(list) => {
                write_array_header(out, list.len());
                for r in list {
                    write_array_header(out, 5);
                    write_bulk(out, &r.id.encode());
                    write_int(out, i64::from(r.channel));
                    write_int(out, r.fence as i64);
                    write_int(out, i64::from(r.attempts));
                    write_bulk(out, &r.payload);
                    if !spill(out) {
                        return false;
                    }
                }
            }
            Reply::Ints(list) => {
                write_array_header(out, list.len());
                for n in list {
                    write_int(out, *n);
                }
            }
            Reply::Job(job) => {
                write_array_header(out, 6);
                write_bulk(out, &job.id.encode());
                write_int(out, i64::from(job.channel));
                write_bulk(out, job.state.name().as_bytes());
                write_int(out, i64::from(job.attempts));
                write_bulk(out, &job.payload);
                write_int(out, job.due_ms.map_or(-1, |d| d as i64));
            }
            Reply::Dead(list) => {
                write_array_header(out, list.len());
                for d in list {
                    write_array_header(out, 5);
                    write_bulk(out, &d.id.encode());
                    write_int(out, i64::from(d.channel));
                    write_int(out, i64::from(d.attempts));
                    write_bulk(out, &d.reason);
                    write_bulk(out, &d.payload);
                    if !spill(out) {
                        return false;
                    }
                }
            }
            Reply::Channels(list) => {
                write_array_header(out, list.len());
                for c in list {
                    write_array_header(out, 6);
                    write_int(out, i64::from(c.channel));
                    for n in [c.counts.ready, c.counts.scheduled, c.counts.reserved, c.counts.dead] {
                        write_int(out, n as i64);
                    }
                    // No ready job: an empty id (a null would be spelled
                    // differently in RESP2 and RESP3).
                    match c.oldest_ready {
                        Some(id) => write_bulk(out, &id.encode()),
                        None => write_bulk(out, b""),
                    }
                    if !spill(out) {
                        return false;
                    }
                }
            }
            Reply::Nodes(list) => {
                write_array_header(out, list.len());
                for n in list {
                    write_array_header(out, 4);
                    write_bulk(out, &n.node_id);
                    write_int(out, n.age_ms as i64);
                    write_int(out, n.ttl_ms as i64);
                    write_bulk(out, &n.description);
                }
            }
        }
        spill(out)
    }
}

/// Compactions since start, and whether one is running now (STATS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    pub total: u64,
    pub running: bool,
}

/// The STATS body: one `key:value` line per figure.
pub fn stats_text(
    stats: &Stats,
    connections: usize,
    blocked_fetches: usize,
    durability: &str,
    uptime_s: u64,
    compaction: CompactionStats,
) -> Vec<u8> {
    let lines: [(&str, String); 19] = [
        ("ready", stats.ready.to_string()),
        ("scheduled", stats.scheduled.to_string()),
        ("reserved", stats.reserved.to_string()),
        ("completed", stats.completed.to_string()),
        ("dead", stats.dead.to_string()),
        ("cancelled", stats.cancelled.to_string()),
        ("pushed_total", stats.pushed_total.to_string()),
        ("acked_total", stats.acked_total.to_string()),
        ("retried_total", stats.retried_total.to_string()),
        ("failed_total", stats.failed_total.to_string()),
        ("cancelled_total", stats.cancelled_total.to_string()),
        ("expired_leases_total", stats.expired_leases_total.to_string()),
        ("released_total", stats.released_total.to_string()),
        ("connections", connections.to_string()),
        ("blocked_fetches", blocked_fetches.to_string()),
        ("durability", durability.to_string()),
        ("uptime_s", uptime_s.to_string()),
        ("compactions_total", compaction.total.to_string()),
        ("compacting", u8::from(compaction.running).to_string()),
    ];
    let mut out = String::new();
    for (key, value) in lines {
        out.push_str(key);
        out.push(':');
        out.push_str(&value);
        out.push_str("\r\n");
    }
    out.into_bytes()
}
