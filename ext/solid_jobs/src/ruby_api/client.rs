//! `SolidJobs::Native::Client`: the producer side of the Redis backend
//! (enqueue, schedule, the publication barrier), the adapter API's claim
//! and settle calls, operator writes (control requests, archive removal)
//! and a raw command escape hatch for inspection. One frozen, shareable
//! instance serves every Ractor; connections come from a checkout pool.

use std::sync::{Arc, OnceLock};

use magnus::scan_args::scan_args;
use magnus::{function, method, prelude::*, Error, RArray, RHash, RModule, Ruby, Value};
use solid_core::envelope::{validate_channel, Envelope};
use solid_core::now_ms;
use solid_core::priority::{split_route, with_priority};
use solid_core::redis::connection::{Connector, Pool};
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::Store;
use solid_core::telemetry::Telemetry;

use crate::helpers::convert::to_json;
use crate::helpers::envelopes::{build_envelope, by_channel, envelope_to_ruby, parse_envelopes};
use crate::helpers::errors::{arg_error, to_ruby as err};
use crate::helpers::flow::Flow;
use crate::helpers::nogvl::without_gvl;
use crate::helpers::publisher_telemetry::PublisherTelemetry;
use crate::helpers::raw_command::raw_call;
use crate::helpers::settings::{from_hash, timeouts, PublisherTelemetrySettings};

/// Claim calls one adapter `claim` makes at most while claims stop at
/// their blocked budget: 100,000 blocked jobs set aside before it says nil.
const ADAPTER_CLAIM_LOOKS: usize = 100;

/// The channel of `route` (`name`, or `name:p` for priority p != 5), checked.
fn channel_of(route: &str) -> Result<&str, Error> {
    let (channel, _) = split_route(route).map_err(err)?;
    validate_channel(channel).map_err(err)?;
    Ok(channel)
}

/// One envelope for `route`: built for its channel, with the route's
/// priority in `meta.priority` (none for the default), so the envelope
/// names its priority wherever it travels (interceptors, unarchive).
fn build_routed(
    ruby: &Ruby,
    task: &str,
    arguments: Value,
    route: &str,
    max_failures: u32,
    due_ms: Option<u64>,
    path: &str,
) -> Result<Envelope, Error> {
    let (channel, priority) = split_route(route).map_err(err)?;
    let env = build_envelope(ruby, task, arguments, channel, max_failures, due_ms, path)?;
    with_priority(env, priority).map_err(err)
}

#[magnus::wrap(class = "SolidJobs::Native::Client", free_immediately, size, frozen_shareable)]
pub struct Client {
    pool: Pool,
    store: Store,
    namespace: String,
    /// Set once by `enable_telemetry`, before the client is shared.
    telemetry: OnceLock<PublisherTelemetry>,
}

impl Client {
    /// new(url, namespace, timeouts = nil): `timeouts` is `{connect:, read:,
    /// write:}` in seconds (`Configuration#timeouts`), nil for the defaults.
    fn new(ruby: &Ruby, args: &[Value]) -> Result<Self, Error> {
        let args = scan_args::<(String, String), (Option<Value>,), (), (), (), ()>(args)?;
        let (url, namespace) = args.required;
        let connector = Connector::with_timeouts(&url, timeouts(ruby, args.optional.0)?).map_err(err)?;
        Ok(Client {
            pool: Pool::new(connector),
            store: Store::new(Keyspace::new(&namespace)),
            namespace,
            telemetry: OnceLock::new(),
        })
    }

    fn url(&self) -> String {
        self.pool.connector().url().to_owned()
    }

    /// Writes to `channel`, a route: the channel name, or `name:p` for jobs
    /// of priority p != 5 (docs/flow-control.md "Priorities"), whose list
    /// is that level's.
    fn write(&self, channel: &str, due_ms: Option<u64>, raws: Vec<String>) -> Result<(), Error> {
        channel_of(channel)?;
        without_gvl(|_| {
            self.pool.with(|c| match due_ms {
                Some(due) if due > now_ms() => self.store.schedule(c, channel, due, &raws),
                _ => self.store.enqueue(c, channel, &raws),
            })
        })?
        .map(|_written| ())
        .map_err(err)
    }

    /// push(task, arguments, channel, max_failures, due_ms) -> id
    fn push(
        ruby: &Ruby,
        rb_self: &Self,
        task: String,
        arguments: Value,
        channel: String,
        max_failures: u32,
        due_ms: Option<u64>,
    ) -> Result<String, Error> {
        let started = now_ms();
        let env = build_routed(ruby, &task, arguments, &channel, max_failures, due_ms, "arguments")?;
        rb_self.write(&channel, due_ms, vec![env.encode()])?;
        rb_self.journal_publication(&task, &env.channel, std::slice::from_ref(&env.id), started, due_ms);
        Ok(env.id)
    }

    /// push_many(task, [arguments, ...], channel, max_failures, due_ms) -> [id, ...]
    /// Every argument list is validated before anything is written.
    fn push_many(
        ruby: &Ruby,
        rb_self: &Self,
        task: String,
        lists: RArray,
        channel: String,
        max_failures: u32,
        due_ms: Option<u64>,
    ) -> Result<Vec<String>, Error> {
        let started = now_ms();
        let mut ids = Vec::with_capacity(lists.len());
        let mut raws = Vec::with_capacity(lists.len());
        for (i, args) in lists.into_iter().enumerate() {
            let env =
                build_routed(ruby, &task, args, &channel, max_failures, due_ms, &format!("arguments of job {i}"))?;
            raws.push(env.encode());
            ids.push(env.id);
        }
        if !raws.is_empty() {
            rb_self.write(&channel, due_ms, raws)?;
            rb_self.journal_publication(&task, channel_of(&channel)?, &ids, started, due_ms);
        }
        Ok(ids)
    }

    /// push_limited(task, [arguments, ...], channel, max_failures, due_ms,
    /// flow) -> [id, ...]: a concurrency and/or rate limited task's jobs
    /// (docs/flow-control.md; `flow` as helpers/flow.rs says), each with its
    /// `meta.flow`. One write, as push_many.
    #[allow(clippy::too_many_arguments)]
    fn push_limited(
        ruby: &Ruby,
        rb_self: &Self,
        task: String,
        lists: RArray,
        channel: String,
        max_failures: u32,
        due_ms: Option<u64>,
        flow: RArray,
    ) -> Result<Vec<String>, Error> {
        let started = now_ms();
        let flow = Flow::parse(flow, lists.len())?;
        let mut ids = Vec::with_capacity(lists.len());
        let mut raws = Vec::with_capacity(lists.len());
        for (i, args) in lists.into_iter().enumerate() {
            let path = if i == 0 { "arguments".to_owned() } else { format!("arguments of job {i}") };
            let env = build_routed(ruby, &task, args, &channel, max_failures, due_ms, &path)?;
            let env = flow.apply(ruby, env, i)?;
            raws.push(env.encode());
            ids.push(env.id);
        }
        if !raws.is_empty() {
            rb_self.write(&channel, due_ms, raws)?;
            rb_self.journal_publication(&task, channel_of(&channel)?, &ids, started, due_ms);
        }
        Ok(ids)
    }

    /// with_flow(envelope Hash, flow, index) -> envelope Hash: the
    /// envelope with job `index`'s `meta.flow` (re)applied in its fixed
    /// place, after publication interceptors ran (an interceptor cannot
    /// drop a limit). `flow` as push_limited takes it.
    fn with_flow(ruby: &Ruby, envelope: Value, flow: RArray, index: usize) -> Result<Value, Error> {
        let json = to_json(ruby, envelope, "envelope")?;
        let env: Envelope =
            serde_json::from_value(json).map_err(|e| arg_error(format!("the envelope has the wrong shape: {e}")))?;
        let jobs = index + 1;
        let flow = Flow::parse_for(flow, jobs)?;
        envelope_to_ruby(ruby, &flow.apply(ruby, env, index)?)
    }

    /// push_unique(task, [arguments, ...], [key material, ...], channel,
    /// max_failures, due_ms, [mode, lock_ttl_ms, archive_max_age_ms],
    /// flow = nil) ->
    /// [[id, ...], [duplicate index, ...]]: a unique task's jobs
    /// (docs/unique.md), each written with its lock unless the lock names a
    /// live job, whose id then stands in its place. Every argument list and
    /// key material is validated before anything is written.
    #[allow(clippy::too_many_arguments)]
    fn push_unique(
        ruby: &Ruby,
        rb_self: &Self,
        task: String,
        lists: RArray,
        materials: RArray,
        channel: String,
        max_failures: u32,
        due_ms: Option<u64>,
        lock: (String, u64, u64),
        flow: Option<RArray>,
    ) -> Result<(Vec<String>, Vec<usize>), Error> {
        let started = now_ms();
        let flow = flow.map(|f| Flow::parse(f, lists.len())).transpose()?;
        let (mode, ttl_ms, archive_max_age_ms) = lock;
        let mode = solid_core::unique::Mode::parse(&mode).map_err(err)?;
        if lists.len() != materials.len() {
            return Err(arg_error("push_unique needs one key material per argument list".into()));
        }
        let (_, priority) = split_route(&channel).map_err(err)?;
        channel_of(&channel)?;
        let mut jobs = Vec::with_capacity(lists.len());
        for (i, (args, material)) in lists.into_iter().zip(materials).enumerate() {
            let path = if i == 0 { "arguments".to_owned() } else { format!("arguments of job {i}") };
            let material = to_json(ruby, material, &format!("the unique key of job {i}"))?;
            let hex = solid_core::unique::lock_hex(&task, &material);
            let env = build_routed(ruby, &task, args, &channel, max_failures, due_ms, &path)?;
            // The lock's meta replaces the envelope's: the priority goes
            // back in its place after it.
            let env = env.with_meta(solid_core::unique::meta(&hex, mode)).map_err(err)?;
            let env = with_priority(env, priority).map_err(err)?;
            // A limited unique task: the flow meta goes before the lock.
            let env = match &flow {
                Some(f) => f.apply(ruby, env, i)?,
                None => env,
            };
            jobs.push((hex, env));
        }
        if jobs.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let ids = without_gvl(|_| {
            rb_self.pool.with(|c| rb_self.store.enqueue_unique(c, &channel, due_ms, ttl_ms, archive_max_age_ms, &jobs))
        })?
        .map_err(err)?;
        // One pass: an entry is a duplicate exactly when the id it stands
        // for is not its own, so the written ids are the others.
        let mut duplicates = Vec::new();
        let mut written = Vec::with_capacity(jobs.len());
        for (i, ((_, env), id)) in jobs.iter().zip(&ids).enumerate() {
            if env.id == *id {
                written.push(env.id.clone());
            } else {
                duplicates.push(i);
            }
        }
        if !written.is_empty() {
            rb_self.journal_publication(&task, channel_of(&channel)?, &written, started, due_ms);
        }
        Ok((ids, duplicates))
    }

    /// build(task, arguments, channel, max_failures, due_ms) -> envelope Hash,
    /// for publication interceptors and the testing modes.
    fn build(
        ruby: &Ruby,
        task: String,
        arguments: Value,
        channel: String,
        max_failures: u32,
        due_ms: Option<u64>,
    ) -> Result<Value, Error> {
        let env = build_routed(ruby, &task, arguments, &channel, max_failures, due_ms, "arguments")?;
        envelope_to_ruby(ruby, &env)
    }

    /// push_envelopes([envelope Hash, ...], due_ms) -> [id, ...]: writes
    /// envelopes (possibly changed by interceptors) after validating them.
    fn push_envelopes(
        ruby: &Ruby,
        rb_self: &Self,
        envelopes: RArray,
        due_ms: Option<u64>,
    ) -> Result<Vec<String>, Error> {
        let started = now_ms();
        let mut ids = Vec::new();
        for (channel, group) in by_channel(parse_envelopes(ruby, envelopes)?) {
            rb_self.write(&channel, due_ms, group.iter().map(|e| e.encode()).collect())?;
            for env in &group {
                ids.push(env.id.clone());
                rb_self.journal_publication(&env.task, &env.channel, std::slice::from_ref(&env.id), started, due_ms);
            }
        }
        Ok(ids)
    }

    /// hold_envelopes([envelope Hash, ...], due_ms, ttl_ms) -> [[id, member], ...]:
    /// writes behind the publication barrier (invisible until
    /// release_held, or until ttl_ms passes and a node's heartbeat
    /// releases them).
    fn hold_envelopes(
        ruby: &Ruby,
        rb_self: &Self,
        envelopes: RArray,
        due_ms: Option<u64>,
        ttl_ms: u64,
    ) -> Result<Vec<(String, String)>, Error> {
        let started = now_ms();
        let due = due_ms.filter(|&d| d > started);
        let mut out = Vec::new();
        for (channel, group) in by_channel(parse_envelopes(ruby, envelopes)?) {
            let raws: Vec<String> = group.iter().map(|e| e.encode()).collect();
            let members =
                without_gvl(|_| rb_self.pool.with(|c| rb_self.store.hold(c, &channel, due, now_ms() + ttl_ms, &raws)))?
                    .map_err(err)?;
            for (env, member) in group.iter().zip(members) {
                rb_self.journal_publication(&env.task, &env.channel, std::slice::from_ref(&env.id), started, due);
                out.push((env.id.clone(), member));
            }
        }
        Ok(out)
    }

    /// release_held([member, ...]) -> number made visible.
    fn release_held(&self, members: Vec<String>) -> Result<u64, Error> {
        without_gvl(|_| self.pool.with(|c| self.store.release(c, &members)))?.map_err(err)
    }

    /// claim(node_id, channel, ttl_ms) -> [token, envelope JSON] or nil:
    /// registers `node_id` for `ttl_ms` and claims one job (adapter API).
    /// nil means the channel had no claimable job: a claim that stopped at
    /// its blocked budget (1,000 jobs of saturated keys set aside, `more`)
    /// or met a malformed entry (quarantined) looks again, up to
    /// ADAPTER_CLAIM_LOOKS calls, as a node's fetcher does.
    fn claim(&self, node_id: String, channel: String, ttl_ms: u64) -> Result<Option<(u64, String)>, Error> {
        for _ in 0..ADAPTER_CLAIM_LOOKS {
            let batch = without_gvl(|_| {
                self.pool.with(|c| {
                    self.store.heartbeat(c, &node_id, ttl_ms, r#"{"adapter":true}"#, &[channel.as_str()], 0)?;
                    self.store.claim(c, &node_id, &[channel.as_str()], 1, now_ms())
                })
            })?
            .map_err(err)?;
            if let Some(job) = batch.jobs.into_iter().next() {
                return Ok(Some((job.token, job.raw)));
            }
            let quarantined = !batch.malformed.is_empty();
            for m in &batch.malformed {
                let _ = without_gvl(|_| {
                    self.pool.with(|c| self.store.quarantine(c, &node_id, m.token, &m.channel, &m.raw, &m.reason))
                });
            }
            if !(batch.more || quarantined) {
                break;
            }
        }
        Ok(None)
    }

    /// An adapter claim (from `claim`) as the store settles it.
    fn claimed(token: u64, channel: &str, raw: &str) -> Result<solid_core::ClaimedJob, Error> {
        let envelope = Envelope::decode(raw).map_err(err)?;
        Ok(solid_core::ClaimedJob {
            token,
            channel: channel.to_owned(),
            // An adapter claim names its channel; the level comes with the
            // envelope, so a retry goes back to the job's own list.
            priority: solid_core::priority::of(envelope.meta.as_ref()),
            raw: raw.to_owned(),
            envelope,
            claimed_ms: now_ms(),
            taken_at: None,
            source: 0,
            attempts: 0,
        })
    }

    // The settle_* methods end an adapter claim. One method per outcome, so
    // there is no action string that could be misspelt into another
    // outcome. Each raises StaleClaimError, and changes nothing, when the
    // claim was recovered meanwhile.

    /// settle_ack(node_id, token, channel, envelope_json): the job is done.
    fn settle_ack(&self, node_id: String, token: u64, channel: String, raw: String) -> Result<(), Error> {
        let job = Self::claimed(token, &channel, &raw)?;
        without_gvl(|_| {
            self.pool.with(|c| match self.store.ack(c, &node_id, &[(token, job.envelope.id.clone())])?.as_slice() {
                [] => Ok(()),
                _ => Err(solid_core::Error::StaleClaim(token)),
            })
        })?
        .map_err(err)
    }

    /// settle_retry(node_id, token, channel, envelope_json, delay_ms): the
    /// job waits in `retrying` for `delay_ms`.
    fn settle_retry(
        &self,
        node_id: String,
        token: u64,
        channel: String,
        raw: String,
        delay_ms: u64,
    ) -> Result<(), Error> {
        let job = Self::claimed(token, &channel, &raw)?;
        without_gvl(|_| self.pool.with(|c| self.store.retry(c, &node_id, &job, now_ms() + delay_ms)))?.map_err(err)
    }

    /// settle_discard(node_id, token, channel, envelope_json, reason): the
    /// job is archived as discarded, with `reason`.
    fn settle_discard(
        &self,
        node_id: String,
        token: u64,
        channel: String,
        raw: String,
        reason: String,
    ) -> Result<(), Error> {
        let job = Self::claimed(token, &channel, &raw)?;
        let id = &job.envelope.id;
        let record = serde_json::json!({
            "id": id, "task": job.envelope.task, "channel": channel, "raw": raw,
            "reason": reason, "discarded_ms": now_ms(), "kind": "discarded",
        });
        without_gvl(|_| self.pool.with(|c| self.store.discard(c, &node_id, Some(token), id, &record, true)))?
            .map_err(err)
    }

    /// recover() -> jobs requeued from nodes whose heartbeat expired.
    fn recover(&self) -> Result<u64, Error> {
        without_gvl(|_| self.pool.with(|c| self.store.recover_dead_nodes(c)))?.map_err(err)
    }

    /// cancel(id) -> true when a waiting job was cancelled, false when the
    /// id is unknown or already cancelled; raises JobRunning when it is
    /// running.
    fn cancel(&self, id: String) -> Result<bool, Error> {
        without_gvl(|_| self.pool.with(|c| self.store.cancel(c, &id)))?.map_err(err)
    }

    /// job_state(id) -> nil or [state, channel, envelope JSON or nil]
    fn job_state(&self, id: String) -> Result<Option<(String, String, Option<String>)>, Error> {
        let found = without_gvl(|_| self.pool.with(|c| self.store.job_state(c, &id)))?.map_err(err)?;
        Ok(found.map(|j| (j.state, j.channel, j.envelope)))
    }

    /// unarchive(id) -> true, or false when the job is no longer archived.
    fn unarchive(&self, id: String) -> Result<bool, Error> {
        without_gvl(|_| self.pool.with(|c| self.store.unarchive(c, &id)))?.map_err(err)
    }

    /// forget_archived(id) -> true when it was archived (and now is not).
    fn forget_archived(&self, id: String) -> Result<bool, Error> {
        without_gvl(|_| self.pool.with(|c| self.store.forget_archived(c, &id)))?.map_err(err)
    }

    /// pause_channel(name, by or nil) -> true when it was not paused
    /// already. Claims of every node skip it from their next call on.
    fn pause_channel(&self, channel: String, by: Option<String>) -> Result<bool, Error> {
        without_gvl(|_| self.pool.with(|c| self.store.pause_channel(c, &channel, by.as_deref())))?.map_err(err)
    }

    /// resume_channel(name) -> true when it was paused; rings the doorbell
    /// when the channel holds ready jobs.
    fn resume_channel(&self, channel: String) -> Result<bool, Error> {
        without_gvl(|_| self.pool.with(|c| self.store.resume_channel(c, &channel)))?.map_err(err)
    }

    /// paused_channels -> [[name, paused_ms, by or nil], ...] by name.
    fn paused_channels(&self) -> Result<Vec<(String, u64, Option<String>)>, Error> {
        let paused = without_gvl(|_| self.pool.with(|c| self.store.paused_channels(c)))?.map_err(err)?;
        Ok(paused.into_iter().map(|p| (p.channel, p.paused_ms, p.by)).collect())
    }

    /// request_control(node_id, request_json, ttl_ms)
    fn request_control(&self, node_id: String, request: String, ttl_ms: u64) -> Result<(), Error> {
        without_gvl(|_| self.pool.with(|c| self.store.request_control(c, &node_id, &request, ttl_ms)))?.map_err(err)
    }

    /// node_health(limit) -> [redis_now_ms, registered, [[id, pttl_ms, description JSON or nil], ...]]:
    /// the registered nodes on Redis' clock, in one read-only round trip.
    #[allow(clippy::type_complexity)]
    fn node_health(&self, limit: usize) -> Result<(u64, u64, Vec<(String, i64, Option<String>)>), Error> {
        let h = without_gvl(|_| self.pool.with(|c| self.store.node_health(c, limit)))?.map_err(err)?;
        Ok((h.now_ms, h.registered, h.nodes.into_iter().map(|n| (n.id, n.ttl_ms, n.description)).collect()))
    }

    /// call([command, arg...]) -> reply: a raw Redis command, for inspection
    /// tools and tests. Never used on the job path.
    fn call(&self, args: RArray) -> Result<Value, Error> {
        raw_call(&self.pool, args)
    }

    /// enable_telemetry({hostname:, journal:, sample_per_interval:, buffer:,
    /// journal_size:}), once, before the client is shared.
    fn enable_telemetry(ruby: &Ruby, rb_self: &Self, settings: RHash) -> Result<(), Error> {
        let settings: PublisherTelemetrySettings =
            from_hash(ruby, settings.as_value(), "publisher telemetry settings")?;
        let telemetry = PublisherTelemetry::new(settings, &rb_self.namespace);
        rb_self.telemetry.set(telemetry).map_err(|_| arg_error("telemetry is already enabled on this client".into()))
    }

    /// The journal source of this process's publications, or nil.
    fn telemetry_source(&self) -> Option<String> {
        self.publisher_telemetry().map(|t| t.source().to_owned())
    }

    /// Writes what this process's telemetry holds now (at exit).
    fn flush_telemetry(&self) -> Result<bool, Error> {
        let Some(t) = self.telemetry.get().and_then(|p| p.started()) else {
            return Ok(false);
        };
        t.tick();
        without_gvl(|_| self.pool.with(|c| t.flush(c)))?.map_err(err)?;
        Ok(true)
    }

    fn publisher_telemetry(&self) -> Option<Arc<Telemetry>> {
        self.telemetry.get().and_then(|p| p.current(self.pool.connector()))
    }

    /// Counts a publication and journals it when sampled; no I/O here.
    fn journal_publication(&self, task: &str, channel: &str, ids: &[String], started_ms: u64, due_ms: Option<u64>) {
        if let Some(t) = self.publisher_telemetry() {
            t.published(task, channel, ids, started_ms, due_ms);
        }
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("Client", ruby.class_object())?;
    class.define_singleton_method("new", function!(Client::new, -1))?;
    class.define_singleton_method("build", function!(Client::build, 5))?;
    class.define_method("url", method!(Client::url, 0))?;
    class.define_method("push", method!(Client::push, 5))?;
    class.define_method("push_many", method!(Client::push_many, 5))?;
    class.define_method("push_unique", method!(Client::push_unique, 8))?;
    class.define_method("push_limited", method!(Client::push_limited, 6))?;
    class.define_singleton_method("with_flow", function!(Client::with_flow, 3))?;
    class.define_method("push_envelopes", method!(Client::push_envelopes, 2))?;
    class.define_method("hold_envelopes", method!(Client::hold_envelopes, 3))?;
    class.define_method("release_held", method!(Client::release_held, 1))?;
    class.define_method("claim", method!(Client::claim, 3))?;
    class.define_method("settle_ack", method!(Client::settle_ack, 4))?;
    class.define_method("settle_retry", method!(Client::settle_retry, 5))?;
    class.define_method("settle_discard", method!(Client::settle_discard, 5))?;
    class.define_method("recover", method!(Client::recover, 0))?;
    class.define_method("cancel", method!(Client::cancel, 1))?;
    class.define_method("job_state", method!(Client::job_state, 1))?;
    class.define_method("unarchive", method!(Client::unarchive, 1))?;
    class.define_method("forget_archived", method!(Client::forget_archived, 1))?;
    class.define_method("request_control", method!(Client::request_control, 3))?;
    class.define_method("pause_channel", method!(Client::pause_channel, 2))?;
    class.define_method("resume_channel", method!(Client::resume_channel, 1))?;
    class.define_method("paused_channels", method!(Client::paused_channels, 0))?;
    class.define_method("call", method!(Client::call, 1))?;
    class.define_method("node_health", method!(Client::node_health, 1))?;
    class.define_method("enable_telemetry", method!(Client::enable_telemetry, 1))?;
    class.define_method("telemetry_source", method!(Client::telemetry_source, 0))?;
    class.define_method("flush_telemetry", method!(Client::flush_telemetry, 0))?;
    Ok(())
}
