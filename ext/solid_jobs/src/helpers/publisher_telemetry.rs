//! A producer's telemetry (`Native::Client#enable_telemetry`): counts and
//! sampled `job.enqueued` / `job.journaled` entries for every publication,
//! written by a background flush thread, never on the enqueue path.
//!
//! A forked child gets its own journal source and flush thread on its first
//! publication: threads do not survive `fork`, and the parent's sequence is
//! not the child's.

use std::sync::Arc;

use parking_lot::Mutex;
use solid_core::redis::connection::Connector;
use solid_core::telemetry::{flusher, Telemetry, TelemetryConfig};

use super::settings::PublisherTelemetrySettings;

/// Settings from `enable_telemetry`, and the live telemetry of this process.
pub struct PublisherTelemetry {
    hostname: String,
    cfg: TelemetryConfig,
    live: Mutex<Option<(u32, Arc<Telemetry>)>>,
}

impl PublisherTelemetry {
    pub fn new(settings: PublisherTelemetrySettings, namespace: &str) -> Self {
        let cfg = settings.config(namespace);
        PublisherTelemetry { hostname: settings.hostname, cfg, live: Mutex::new(None) }
    }

    /// This process's telemetry, started (with its flush thread, writing
    /// through `connector`) on first use and again after a fork.
    pub fn current(&self, connector: &Connector) -> Option<Arc<Telemetry>> {
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
        flusher::spawn(&t, connector.clone()).ok()?;
        *live = Some((pid, t.clone()));
        Some(t)
    }

    /// This process's telemetry if it has started (no thread is started).
    pub fn started(&self) -> Option<Arc<Telemetry>> {
        self.live.lock().as_ref().filter(|(pid, _)| *pid == std::process::id()).map(|(_, t)| t.clone())
    }
}
