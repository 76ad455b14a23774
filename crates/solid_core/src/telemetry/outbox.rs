//! What the next flush writes besides the journal entries (the latest
//! observations, a backtrace dump, newly seen task names), and the flush
//! itself: everything in one pipelined call, kept for the next try when the
//! call fails.

use std::collections::HashSet;
use std::time::Duration;

use parking_lot::Mutex;

use super::journal::{self, Journal};
use crate::error::Result;
use crate::redis::connection::query_pipeline;
use crate::redis::keyspace::Keyspace;

#[derive(Default)]
struct Pending {
    observation: Option<Vec<(String, String)>>,
    backtraces: Option<(String, u64)>,
    tasks: Vec<String>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.observation.is_none() && self.backtraces.is_none() && self.tasks.is_empty()
    }
}

pub(super) struct Outbox {
    keys: Keyspace,
    /// The journal source (node id or publisher id) the entries are written as.
    source: String,
    journal_size: u64,
    observation_ttl: Duration,
    pending: Mutex<Pending>,
    /// Task names already written (or waiting to be), so each is sent once.
    seen_tasks: Mutex<HashSet<String>>,
}

impl Outbox {
    pub fn new(keys: Keyspace, source: String, journal_size: u64, observation_ttl: Duration) -> Self {
        Outbox {
            keys,
            source,
            journal_size,
            observation_ttl,
            pending: Mutex::new(Pending::default()),
            seen_tasks: Mutex::new(HashSet::new()),
        }
    }

    /// Queues the names among `tasks` not seen before (one lock per batch).
    pub fn saw_tasks<'a>(&self, tasks: impl IntoIterator<Item = &'a str>) {
        let mut seen = self.seen_tasks.lock();
        let mut fresh = Vec::new();
        for task in tasks {
            if !seen.contains(task) {
                seen.insert(task.to_owned());
                fresh.push(task.to_owned());
            }
        }
        drop(seen);
        if !fresh.is_empty() {
            self.pending.lock().tasks.extend(fresh);
        }
    }

    /// The fields of `observations:<source>`, replacing any not yet written.
    pub fn observation(&self, fields: Vec<(String, String)>) {
        self.pending.lock().observation = Some(fields);
    }

    pub fn backtraces(&self, text: String, ttl_ms: u64) {
        self.pending.lock().backtraces = Some((text, ttl_ms));
    }

    pub fn is_empty(&self) -> bool {
        self.pending.lock().is_empty()
    }

    /// Writes the next batch of `journal` (None: the journal is off) and
    /// everything pending here in one pipelined call. On failure everything
    /// is kept for the next try (bounded: see [`journal`]).
    pub fn flush(&self, conn: &mut redis::Connection, journal: Option<&Journal>) -> Result<()> {
        let batch = journal.map(|j| j.take_batch()).unwrap_or_default();
        let outbox = std::mem::take(&mut *self.pending.lock());
        if batch.is_empty() && outbox.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        journal::add_to(&mut pipe, &self.keys.telemetry(), self.journal_size, &self.source, &batch);
        let node = &self.source;
        if let Some(fields) = &outbox.observation {
            let key = self.keys.observations(node);
            pipe.hset_multiple(&key, fields).ignore();
            pipe.pexpire(&key, self.observation_ttl.as_millis() as i64).ignore();
        }
        if let Some((text, ttl)) = &outbox.backtraces {
            pipe.cmd("SET").arg(self.keys.backtraces(node)).arg(text).arg("PX").arg(*ttl).ignore();
        }
        if !outbox.tasks.is_empty() {
            pipe.sadd(self.keys.tasks(), &outbox.tasks).ignore();
        }
        match query_pipeline::<()>(&pipe, conn) {
            Ok(()) => Ok(()),
            Err(e) => {
                if let Some(j) = journal {
                    j.put_back(batch);
                }
                let mut now = self.pending.lock();
                now.observation = now.observation.take().or(outbox.observation);
                now.backtraces = now.backtraces.take().or(outbox.backtraces);
                now.tasks.extend(outbox.tasks);
                Err(e.into())
            }
        }
    }
}
