//! The settings Hashes the Ruby side passes to native constructors, as
//! named structs. Keys may be Symbols or Strings. Every struct refuses
//! unknown keys and requires every non-optional one, so a setting renamed
//! or dropped on one side of the boundary fails at once with an
//! ArgumentError naming the key, instead of silently shifting the values
//! after it (as a positional array would).
//!
//! Who builds each Hash: `SolidJobs::Conductor#telemetry_spec`
//! ([`NodeTelemetrySettings`]), `Backends::Redis#source_spec` and
//! `Backends::SolidEngine#source_spec` ([`SourceSettings`]),
//! `Backends::Redis#initialize` ([`PublisherTelemetrySettings`]),
//! `SolidJobs::Configuration#timeouts` ([`TimeoutSettings`], also inside
//! the source settings).

use magnus::error::ErrorType;
use magnus::value::ReprValue;
use magnus::{Error, Ruby, Value};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use solid_core::channel_order::ChannelOrder;
use solid_core::engine::source::{EngineSourceConfig, PresenceConfig};
use solid_core::prefetch::Prefetch;
use solid_core::recurring::{ticks_from, Missed, RecurringSchedule};
use solid_core::redis::connection::Timeouts;
use solid_core::redis::source::RedisSourceConfig;
use solid_core::redis::store::ArchivePolicy;
use solid_core::telemetry::TelemetryConfig;

use super::convert::seconds;
use super::errors::{arg_error, to_ruby as err};

/// Deserializes a settings Hash into `T`. `what` names the Hash in the
/// error ("redis source settings: unknown field `nodeid`, expected ...").
pub fn from_hash<T: DeserializeOwned>(ruby: &Ruby, hash: Value, what: &str) -> Result<T, Error> {
    serde_magnus::deserialize(ruby, hash).map_err(|e| match e.error_type() {
        // Raised by serde (missing/unknown key, wrong type): reworded as
        // an ArgumentError with context. An exception raised by Ruby code
        // (or a throw) passes through unchanged.
        ErrorType::Error(_, msg) => arg_error(format!("{what}: {msg}")),
        _ => e,
    })
}

/// One job source of a worker node, selected by the `kind` key.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceSettings {
    Redis(RedisSourceSettings),
    Engine(EngineSourceSettings),
}

/// `{kind: "redis", url:, namespace:, node_id:, channels: [[name, weight], ...],
///   channel_order:, prefetch:, workers:, heartbeat_interval:, node_ttl:,
///   description:, archive_max_entries:, archive_max_age:, timeouts:,
///   schedules: (optional) [ScheduleSettings, ...]}`;
/// durations in seconds, `prefetch` nil means adaptive for `workers`
/// workers, `timeouts` as [`TimeoutSettings`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSourceSettings {
    url: String,
    namespace: String,
    node_id: String,
    /// The entries of `config.channels` routed to this backend.
    channels: Vec<(String, u32)>,
    channel_order: String,
    prefetch: Option<usize>,
    workers: usize,
    heartbeat_interval: f64,
    node_ttl: f64,
    /// JSON stored in the node key.
    description: String,
    archive_max_entries: u64,
    archive_max_age: f64,
    timeouts: TimeoutSettings,
    /// The recurring schedules this node runs for this backend (absent:
    /// none, no scheduler thread).
    #[serde(default)]
    schedules: Vec<ScheduleSettings>,
}

/// One recurring schedule as `SolidJobs::Recurring.source_specs` builds it:
/// `{name:, every: (seconds) | cron:, time_zone:, task:, arguments: (JSON
/// text of an Array, checked JSON-native by Ruby), channel:, max_failures:,
/// missed: "latest" | "skip", concurrency: nil | [group, limit, key
/// material as JSON text], rate: nil | [group, limit, window ms, slack ms,
/// key material as JSON text]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSettings {
    name: String,
    #[serde(default)]
    every: Option<u64>,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    time_zone: Option<String>,
    task: String,
    arguments: String,
    channel: String,
    max_failures: u32,
    missed: String,
    #[serde(default)]
    concurrency: Option<(String, u64, String)>,
    /// A rate limited task's [group, limit, window ms, slack ms, key
    /// material as JSON text] (decision 42).
    #[serde(default)]
    rate: Option<(String, u64, u64, u64, String)>,
}

impl ScheduleSettings {
    fn into_schedule(self) -> Result<RecurringSchedule, Error> {
        let named = |e: solid_core::Error| arg_error(format!("schedule {:?}: {e}", self.name));
        let ticks = ticks_from(self.every, self.cron.as_deref(), self.time_zone.as_deref()).map_err(named)?;
        let arguments = serde_json::from_str(&self.arguments)
            .map_err(|e| arg_error(format!("schedule {:?}: arguments are not JSON: {e}", self.name)))?;
        let missed = Missed::parse(&self.missed).map_err(named)?;
        let (flow, flow_label) = match &self.concurrency {
            Some((group, limit, material)) => {
                let material = serde_json::from_str(material)
                    .map_err(|e| arg_error(format!("schedule {:?}: concurrency key is not JSON: {e}", self.name)))?;
                solid_core::flow::concurrency(group, *limit, &material)
            }
            None => Default::default(),
        };
        let (flow, flow_label) = match &self.rate {
            Some((group, limit, window_ms, slack_ms, material)) => {
                let material: serde_json::Value = serde_json::from_str(material)
                    .map_err(|e| arg_error(format!("schedule {:?}: rate key is not JSON: {e}", self.name)))?;
                let label = flow_label.or_else(|| match &material {
                    serde_json::Value::Null => None,
                    serde_json::Value::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                });
                (solid_core::flow::with_rate(flow, group, *limit, *window_ms, *slack_ms, &material), label)
            }
            None => (flow, flow_label),
        };
        let schedule = RecurringSchedule {
            name: self.name.clone(),
            ticks,
            task: self.task,
            arguments,
            channel: self.channel,
            max_failures: self.max_failures,
            missed,
            flow,
            flow_label,
        };
        schedule.validate().map_err(named)?;
        Ok(schedule)
    }
}

impl RedisSourceSettings {
    pub fn into_config(self) -> Result<RedisSourceConfig, Error> {
        Ok(RedisSourceConfig {
            redis_url: self.url,
            namespace: self.namespace,
            node_id: self.node_id,
            channels: self.channels,
            order: ChannelOrder::parse(&self.channel_order).map_err(err)?,
            prefetch: prefetch(self.prefetch, self.workers),
            heartbeat_interval: seconds(self.heartbeat_interval, "heartbeat_interval")?,
            node_ttl: seconds(self.node_ttl, "node_ttl")?,
            description: self.description,
            archive: ArchivePolicy {
                max_entries: self.archive_max_entries,
                max_age_ms: seconds(self.archive_max_age, "archive_max_age")?.as_millis() as u64,
            },
            timeouts: self.timeouts.into_timeouts()?,
            schedules: self.schedules.into_iter().map(ScheduleSettings::into_schedule).collect::<Result<_, _>>()?,
        })
    }
}

/// `{kind: "engine", url:, password: (nil or absent: none), channels:
///   [{name:, id:, weight:}, ...], channel_order:, prefetch:, workers:,
///   lease:, timeouts:, node_id:, description:, heartbeat_interval:,
///   node_ttl:}`; `lease` in seconds, `prefetch` and `timeouts` as for Redis;
/// the last four (optional) make the node announce itself to the engine.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSourceSettings {
    url: String,
    password: Option<String>,
    channels: Vec<EngineChannel>,
    channel_order: String,
    prefetch: Option<usize>,
    workers: usize,
    lease: f64,
    timeouts: TimeoutSettings,
    #[serde(default)]
    node_id: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    heartbeat_interval: Option<f64>,
    #[serde(default)]
    node_ttl: Option<f64>,
}

/// A channel served by SolidEngine: its name, the engine's channel id for
/// it, and its weight.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EngineChannel {
    name: String,
    id: u32,
    weight: u32,
}

impl EngineSourceSettings {
    pub fn into_config(self) -> Result<EngineSourceConfig, Error> {
        Ok(EngineSourceConfig {
            url: self.url,
            password: self.password,
            channels: self.channels.into_iter().map(|c| (c.name, c.id, c.weight)).collect(),
            order: ChannelOrder::parse(&self.channel_order).map_err(err)?,
            prefetch: prefetch(self.prefetch, self.workers),
            lease: seconds(self.lease, "lease")?,
            timeouts: self.timeouts.into_timeouts()?,
            presence: match (self.node_id, self.description, self.heartbeat_interval, self.node_ttl) {
                (Some(node_id), Some(description), Some(every), Some(ttl)) => Some(PresenceConfig {
                    node_id,
                    description,
                    every: seconds(every, "heartbeat_interval")?,
                    ttl: seconds(ttl, "node_ttl")?,
                }),
                (None, None, None, None) => None,
                _ => {
                    return Err(arg_error(
                        "engine source settings: node_id, description, heartbeat_interval and node_ttl go together"
                            .into(),
                    ))
                }
            },
        })
    }
}

/// `{connect:, read:, write:}` in seconds: the timeouts of every connection
/// to a backend (`config.connect_timeout`, `read_timeout`, `write_timeout`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutSettings {
    connect: f64,
    read: f64,
    write: f64,
}

impl TimeoutSettings {
    pub fn into_timeouts(self) -> Result<Timeouts, Error> {
        let timeouts = Timeouts {
            connect: seconds(self.connect, "connect timeout")?,
            read: seconds(self.read, "read timeout")?,
            write: seconds(self.write, "write timeout")?,
        };
        timeouts.validate().map_err(err)?;
        Ok(timeouts)
    }
}

/// A constructor's optional timeouts Hash: nil means the defaults.
pub fn timeouts(ruby: &Ruby, hash: Option<Value>) -> Result<Timeouts, Error> {
    match hash {
        Some(h) if !h.is_nil() => from_hash::<TimeoutSettings>(ruby, h, "timeouts")?.into_timeouts(),
        _ => Ok(Timeouts::default()),
    }
}

fn prefetch(fixed: Option<usize>, workers: usize) -> Prefetch {
    match fixed {
        Some(n) => Prefetch::Fixed(n),
        None => Prefetch::Adaptive { workers },
    }
}

/// A worker node's telemetry: `{namespace:, node_id:, journal:,
///   sample_per_interval:, buffer:, journal_size:, deliver:,
///   observation_ttl:}` (`observation_ttl` in seconds).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeTelemetrySettings {
    namespace: String,
    node_id: String,
    journal: bool,
    sample_per_interval: u32,
    buffer: usize,
    journal_size: u64,
    deliver: bool,
    observation_ttl: f64,
}

impl NodeTelemetrySettings {
    pub fn into_config(self) -> Result<TelemetryConfig, Error> {
        Ok(TelemetryConfig {
            namespace: self.namespace,
            source: self.node_id,
            journal: self.journal,
            sample_per_interval: self.sample_per_interval,
            buffer: self.buffer,
            journal_size: self.journal_size,
            deliver: self.deliver,
            observation_ttl: seconds(self.observation_ttl, "observation_ttl")?,
        })
    }
}

/// A producer's telemetry: `{hostname:, journal:, sample_per_interval:,
///   buffer:, journal_size:}`. The journal source is chosen per process
/// (see `publisher_telemetry.rs`); the namespace is the client's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublisherTelemetrySettings {
    pub hostname: String,
    journal: bool,
    sample_per_interval: u32,
    buffer: usize,
    journal_size: u64,
}

impl PublisherTelemetrySettings {
    /// The configuration every process's telemetry starts from; `source`
    /// is filled in when a process first publishes.
    pub fn config(&self, namespace: &str) -> TelemetryConfig {
        TelemetryConfig {
            namespace: namespace.to_owned(),
            source: String::new(),
            journal: self.journal,
            sample_per_interval: self.sample_per_interval,
            buffer: self.buffer,
            journal_size: self.journal_size,
            // Producers have no instrumenter thread to deliver to.
            deliver: false,
            observation_ttl: std::time::Duration::from_secs(1),
        }
    }
}
