//! The producer half of telemetry on `SolidJobs::Native::Client`: counts
//! and sampled `job.enqueued` / `job.journaled` entries for every
//! publication, written by a background flush thread (never on the enqueue
//! path), plus the publication barrier and the operator writes (control
//! requests, archive removal).
//!
//! A forked child gets its own journal source and flush thread on its first
//! publication: threads do not survive `fork`, and the parent's sequence is
//! not the child's.

use std::sync::Arc;
use std::time::Duration;

use magnus::{method, prelude::*, Error, RArray, RModule, Ruby};
use parking_lot::Mutex;
use solid_core::now_ms;
use solid_core::telemetry::{flusher, Telemetry, TelemetryConfig};

use super::client::{parse_envelopes, Client};
use crate::helpers::errors::{arg_error, to_ruby as err};
use crate::helpers::nogvl::without_gvl;

/// Settings from `enable_telemetry`, and the live telemetry of this process.
pub struct PublisherTelemetry {
    hostname: String,
    cfg: TelemetryConfig,
    live: Mutex<Option<(u32, Arc<Telemetry>)>>,
}

impl PublisherTelemetry {
    /// This process's telemetry, started (with its flush thread) on first
    /// use and again after a fork.
    pub fn current(&self, client: &Client) -> Option<Arc<Telemetry>> {
        if !self.cfg.journal {
            return None;
        }
        let pid = std::process::id();
        let mut live = self.live.lock();
        if let Some((owner, t)) = live.as_ref() {
            if *owner == pid {
                return Some(t.clone());
            }
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut cfg = self.cfg.clone();
        cfg.source = format!("publisher:{}:{pid}:{}", self.hostname, &id[..8]);
        let t = Arc::new(Telemetry::new(cfg));
        flusher::spawn(&t, client.connector().clone()).ok()?;
        *live = Some((pid, t.clone()));
        Some(t)
    }

    fn started(&self) -> Option<Arc<Telemetry>> {
        self.live.lock().as_ref().filter(|(pid, _)| *pid == std::process::id()).map(|(_, t)| t.clone())
    }
}

impl Client {
    /// enable_telemetry([hostname, journal, sample_per_interval, buffer, journal_size]),
    /// once, before the client is shared.
    fn enable_telemetry(&self, spec: RArray) -> Result<(), Error> {
        let cfg = TelemetryConfig {
            namespace: self.namespace().to_owned(),
            source: String::new(),
            journal: spec.entry(1)?,
            sample_per_interval: spec.entry(2)?,
            buffer: spec.entry(3)?,
            journal_size: spec.entry(4)?,
            deliver: false,
            observation_ttl: Duration::from_secs(1),
        };
        let pt = PublisherTelemetry { hostname: spec.entry(0)?, cfg, live: Mutex::new(None) };
        self.telemetry_slot().set(pt).map_err(|_| arg_error("telemetry is already enabled on this client".into()))
    }

    /// The journal source of this process's publications, or nil.
    fn telemetry_source(&self) -> Option<String> {
        self.publisher_telemetry().map(|t| t.source().to_owned())
    }

    /// Writes what this process's telemetry holds now (at exit).
    fn flush_telemetry(&self) -> Result<bool, Error> {
        let Some(t) = self.telemetry_slot().get().and_then(|p| p.started()) else { return Ok(false) };
        t.tick();
        without_gvl(|_| self.pool().with(|c| t.flush(c)))?.map_err(err)?;
        Ok(true)
    }

    /// hold_envelopes([envelope Hash, ...], due_ms, ttl_ms) -> [[id, member], ...]:
    /// writes behind the publication barrier (invisible until
    /// release_held, or until ttl_ms passes and a node's heartbeat
    /// releases them).
    fn hold_envelopes(ruby: &Ruby, rb_self: &Self, envelopes: RArray, due_ms: Option<u64>, ttl_ms: u64) -> Result<Vec<(String, String)>, Error> {
        let started = now_ms();
        let due = due_ms.filter(|&d| d > started);
        let mut out = Vec::new();
        for (channel, group) in super::client::by_channel(parse_envelopes(ruby, envelopes)?) {
            let raws: Vec<String> = group.iter().map(|e| e.encode()).collect();
            let members = without_gvl(|_| rb_self.pool().with(|c| rb_self.store().hold(c, &channel, due, now_ms() + ttl_ms, &raws)))?.map_err(err)?;
            for (env, member) in group.iter().zip(members) {
                rb_self.journal_publication(&env.task, &channel, std::slice::from_ref(&env.id), started, due);
                out.push((env.id.clone(), member));
            }
        }
        Ok(out)
    }

    /// release_held([member, ...]) -> number made visible.
    fn release_held(&self, members: Vec<String>) -> Result<u64, Error> {
        without_gvl(|_| self.pool().with(|c| self.store().release(c, &members)))?.map_err(err)
    }

    /// request_control(node_id, request_json, ttl_ms)
    fn request_control(&self, node_id: String, request: String, ttl_ms: u64) -> Result<(), Error> {
        without_gvl(|_| self.pool().with(|c| self.store().request_control(c, &node_id, &request, ttl_ms)))?.map_err(err)
    }

    /// forget_archived(id) -> true when it was archived (and now is not).
    fn forget_archived(&self, id: String) -> Result<bool, Error> {
        without_gvl(|_| self.pool().with(|c| self.store().forget_archived(c, &id)))?.map_err(err)
    }

    fn publisher_telemetry(&self) -> Option<Arc<Telemetry>> {
        self.telemetry_slot().get().and_then(|p| p.current(self))
    }

    /// Counts a publication and journals it when sampled; no I/O here.
    pub(crate) fn journal_publication(&self, task: &str, channel: &str, ids: &[String], started_ms: u64, due_ms: Option<u64>) {
        if let Some(t) = self.publisher_telemetry() {
            t.published(task, channel, ids, started_ms, due_ms);
        }
    }
}

pub fn init(_ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class: magnus::RClass = native.const_get("Client")?;
    class.define_method("enable_telemetry", method!(Client::enable_telemetry, 1))?;
    class.define_method("telemetry_source", method!(Client::telemetry_source, 0))?;
    class.define_method("flush_telemetry", method!(Client::flush_telemetry, 0))?;
    class.define_method("hold_envelopes", method!(Client::hold_envelopes, 3))?;
    class.define_method("release_held", method!(Client::release_held, 1))?;
    class.define_method("request_control", method!(Client::request_control, 3))?;
    class.define_method("forget_archived", method!(Client::forget_archived, 1))?;
    Ok(())
}
