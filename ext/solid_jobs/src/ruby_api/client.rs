//! `SolidJobs::Native::Client`: the producer side (enqueue, schedule) and a
//! raw command escape hatch for inspection. One frozen, shareable instance
//! serves every Ractor; connections come from a checkout pool.

use magnus::{function, method, prelude::*, Error, IntoValue, RArray, RHash, RModule, RString, Ruby, Value};
use solid_core::redis::connection::{Connector, Pool};
use solid_core::envelope::{validate_channel, Envelope};
use solid_core::redis::keyspace::Keyspace;
use solid_core::now_ms;
use solid_core::redis_rs as redis;
use solid_core::redis::store::Store;

use super::envelope_to_ruby;
use super::publisher_telemetry::PublisherTelemetry;
use crate::helpers::convert::to_json;
use crate::helpers::errors::{arg_error, to_ruby as err};
use crate::helpers::nogvl::without_gvl;

#[magnus::wrap(class = "SolidJobs::Native::Client", free_immediately, size, frozen_shareable)]
pub struct Client {
    pool: Pool,
    store: Store,
    namespace: String,
    /// Set by `enable_telemetry` (see publisher_telemetry.rs).
    telemetry: std::sync::OnceLock<PublisherTelemetry>,
}

impl Client {
    fn new(url: String, namespace: String) -> Result<Self, Error> {
        let connector = Connector::new(&url).map_err(err)?;
        Ok(Client { pool: Pool::new(connector), store: Store::new(Keyspace::new(&namespace)), namespace, telemetry: std::sync::OnceLock::new() })
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }
    pub(crate) fn connector(&self) -> &Connector {
        self.pool.connector()
    }
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
    }
    pub(crate) fn telemetry_slot(&self) -> &std::sync::OnceLock<PublisherTelemetry> {
        &self.telemetry
    }

    fn url(&self) -> String {
        self.pool.connector().url().to_owned()
    }

    fn write(&self, channel: &str, due_ms: Option<u64>, raws: Vec<String>) -> Result<(), Error> {
        validate_channel(channel).map_err(err)?;
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
    fn push(ruby: &Ruby, rb_self: &Self, task: String, arguments: Value, channel: String, max_failures: u32, due_ms: Option<u64>) -> Result<String, Error> {
        let started = now_ms();
        let env = build_envelope(ruby, &task, arguments, &channel, max_failures, due_ms, "arguments")?;
        rb_self.write(&channel, due_ms, vec![env.encode()])?;
        rb_self.journal_publication(&task, &channel, std::slice::from_ref(&env.id), started, due_ms);
        Ok(env.id)
    }

    /// push_many(task, [arguments, ...], channel, max_failures, due_ms) -> [id, ...]
    /// Every argument list is validated before anything is written.
    fn push_many(ruby: &Ruby, rb_self: &Self, task: String, lists: RArray, channel: String, max_failures: u32, due_ms: Option<u64>) -> Result<Vec<String>, Error> {
        let started = now_ms();
        let mut ids = Vec::with_capacity(lists.len());
        let mut raws = Vec::with_capacity(lists.len());
        for (i, args) in lists.into_iter().enumerate() {
            let env = build_envelope(ruby, &task, args, &channel, max_failures, due_ms, &format!("arguments of job {i}"))?;
            raws.push(env.encode());
            ids.push(env.id);
        }
        if !raws.is_empty() {
            rb_self.write(&channel, due_ms, raws)?;
            rb_self.journal_publication(&task, &channel, &ids, started, due_ms);
        }
        Ok(ids)
    }

    /// build(task, arguments, channel, max_failures, due_ms) -> envelope Hash,
    /// for publication interceptors and the testing modes.
    fn build(ruby: &Ruby, task: String, arguments: Value, channel: String, max_failures: u32, due_ms: Option<u64>) -> Result<Value, Error> {
        let env = build_envelope(ruby, &task, arguments, &channel, max_failures, due_ms, "arguments")?;
        envelope_to_ruby(&env)
    }

    /// push_envelopes([envelope Hash, ...], due_ms) -> [id, ...]: writes
    /// envelopes (possibly changed by interceptors) after validating them.
    fn push_envelopes(ruby: &Ruby, rb_self: &Self, envelopes: RArray, due_ms: Option<u64>) -> Result<Vec<String>, Error> {
        let started = now_ms();
        let mut ids = Vec::new();
        for (channel, group) in by_channel(parse_envelopes(ruby, envelopes)?) {
            rb_self.write(&channel, due_ms, group.iter().map(|e| e.encode()).collect())?;
            for env in &group {
                ids.push(env.id.clone());
                rb_self.journal_publication(&env.task, &channel, std::slice::from_ref(&env.id), started, due_ms);
            }
        }
        Ok(ids)
    }

    /// claim(node_id, channel, ttl_ms) -> [token, envelope JSON] or nil:
    /// registers `node_id` for `ttl_ms` and claims one job (adapter API).
    fn claim(&self, node_id: String, channel: String, ttl_ms: u64) -> Result<Option<(u64, String)>, Error> {
        let batch = without_gvl(|_| {
            self.pool.with(|c| {
                self.store.heartbeat(c, &node_id, ttl_ms, r#"{"adapter":true}"#, &[channel.as_str()], 0)?;
                self.store.claim(c, &node_id, &[channel.as_str()], 1, now_ms())
            })
        })?
        .map_err(err)?;
        if let Some(m) = batch.malformed.first() {
            let _ = without_gvl(|_| self.pool.with(|c| self.store.quarantine(c, &node_id, m.token, &m.channel, &m.raw, &m.reason)));
            return Ok(None);
        }
        Ok(batch.jobs.into_iter().next().map(|j| (j.token, j.raw)))
    }

    fn claimed(token: u64, channel: &str, raw: &str) -> Result<solid_core::ClaimedJob, Error> {
        let envelope = Envelope::decode(raw).map_err(err)?;
        Ok(solid_core::ClaimedJob {
            token,
            channel: channel.to_owned(),
            raw: raw.to_owned(),
            envelope,
            claimed_ms: now_ms(),
            taken_at: None,
            source: 0,
            attempts: 0,
        })
    }

    /// settle(node_id, token, channel, envelope_json, action, arg) with action
    /// "ack", "retry" (arg: delay ms) or "fail" (arg: reason). Raises
    /// StaleClaimError when the claim was recovered.
    fn settle(&self, node_id: String, token: u64, channel: String, raw: String, action: String, arg: String) -> Result<(), Error> {
        let job = Self::claimed(token, &channel, &raw)?;
        let id = job.envelope.id.clone();
        without_gvl(|_| {
            self.pool.with(|c| match action.as_str() {
                "ack" => match self.store.ack(c, &node_id, &[(token, id.clone())])?.as_slice() {
                    [] => Ok(()),
                    _ => Err(solid_core::Error::StaleClaim(token)),
                },
                "retry" => self.store.retry(c, &node_id, &job, now_ms() + arg.parse::<u64>().unwrap_or(0)),
                _ => {
                    let record = serde_json::json!({
                        "id": id, "task": job.envelope.task, "channel": channel, "raw": raw,
                        "reason": arg, "discarded_ms": now_ms(), "kind": "discarded",
                    });
                    self.store.discard(c, &node_id, Some(token), &id, &record, true)
                }
            })
        })?
        .map_err(err)
    }

    /// recover() -> jobs requeued from nodes whose heartbeat expired.
    fn recover(&self) -> Result<u64, Error> {
        without_gvl(|_| self.pool.with(|c| self.store.recover_dead_nodes(c)))?.map_err(err)
    }

    /// cancel(id) -> true when a waiting job was cancelled; raises
    /// RedisError (BUSY) when it is running.
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

    /// call([command, arg...]) -> reply: a raw Redis command, for inspection
    /// tools and tests. Never used on the job path.
    fn call(&self, args: RArray) -> Result<Value, Error> {
        raw_call(&self.pool, args)
    }
}

/// Builds one envelope; `due_ms` nil means ready now.
pub(crate) fn build_envelope(ruby: &Ruby, task: &str, arguments: Value, channel: &str, max_failures: u32, due_ms: Option<u64>, path: &str) -> Result<Envelope, Error> {
    let args = to_json(ruby, arguments, path)?;
    if !args.is_array() {
        return Err(arg_error(format!("{path} must be an Array")));
    }
    let now = now_ms();
    Envelope::build(task, args, channel, max_failures, now, due_ms.unwrap_or(now).max(now)).map_err(err)
}

/// Envelopes grouped by channel, in first-seen order (one write per channel).
pub(crate) fn by_channel(envelopes: Vec<Envelope>) -> Vec<(String, Vec<Envelope>)> {
    let mut groups: Vec<(String, Vec<Envelope>)> = Vec::new();
    for env in envelopes {
        match groups.iter_mut().find(|(c, _)| *c == env.channel) {
            Some((_, v)) => v.push(env),
            None => groups.push((env.channel.clone(), vec![env])),
        }
    }
    groups
}

/// Validates envelope Hashes (possibly changed by interceptors).
pub(crate) fn parse_envelopes(ruby: &Ruby, envelopes: RArray) -> Result<Vec<Envelope>, Error> {
    envelopes
        .into_iter()
        .enumerate()
        .map(|(i, h)| {
            let json = to_json(ruby, h, &format!("envelope {i}"))?;
            let env: Envelope = serde_json::from_value(json).map_err(|e| arg_error(format!("envelope {i} has the wrong shape: {e}")))?;
            env.validate().map_err(err)?;
            Ok(env)
        })
        .collect()
}

/// Sends one raw command (an Array of Strings) on a pooled connection.
pub(crate) fn raw_call(pool: &Pool, args: RArray) -> Result<Value, Error> {
    let mut parts: Vec<Vec<u8>> = Vec::with_capacity(args.len());
    for a in args.into_iter() {
        let s = RString::from_value(a).ok_or_else(|| arg_error("call takes Strings".into()))?;
        parts.push(unsafe { s.as_slice() }.to_vec());
    }
    let Some((name, rest)) = parts.split_first() else { return Err(arg_error("call needs a command".into())) };
    let reply = without_gvl(|_| {
        pool.with(|c| {
            let mut cmd = redis::cmd(std::str::from_utf8(name).unwrap_or("PING"));
            for p in rest {
                cmd.arg(p.as_slice());
            }
            cmd.query::<redis::Value>(c).map_err(solid_core::Error::from)
        })
    })?
    .map_err(err)?;
    redis_to_ruby(&reply)
}

fn redis_to_ruby(v: &redis::Value) -> Result<Value, Error> {
    let ruby = Ruby::get().expect("GVL");
    Ok(match v {
        redis::Value::Nil => ruby.qnil().as_value(),
        redis::Value::Int(i) => (*i).into_value_with(&ruby),
        redis::Value::BulkString(b) => ruby.str_from_slice(b).as_value(),
        redis::Value::SimpleString(s) => ruby.str_new(s).as_value(),
        redis::Value::Okay => ruby.str_new("OK").as_value(),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            let a = ruby.ary_new_capa(items.len());
            for i in items {
                a.push(redis_to_ruby(i)?)?;
            }
            a.as_value()
        }
        redis::Value::Map(pairs) => {
            let h = RHash::new();
            for (k, v) in pairs {
                h.aset(redis_to_ruby(k)?, redis_to_ruby(v)?)?;
            }
            h.as_value()
        }
        redis::Value::Double(d) => (*d).into_value_with(&ruby),
        redis::Value::Boolean(b) => (*b).into_value_with(&ruby),
        other => ruby.str_new(&format!("{other:?}")).as_value(),
    })
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("Client", ruby.class_object())?;
    class.define_singleton_method("new", function!(Client::new, 2))?;
    class.define_method("url", method!(Client::url, 0))?;
    class.define_method("push", method!(Client::push, 5))?;
    class.define_method("push_many", method!(Client::push_many, 5))?;
    class.define_method("push_envelopes", method!(Client::push_envelopes, 2))?;
    class.define_method("call", method!(Client::call, 1))?;
    class.define_method("unarchive", method!(Client::unarchive, 1))?;
    class.define_method("cancel", method!(Client::cancel, 1))?;
    class.define_method("claim", method!(Client::claim, 3))?;
    class.define_method("settle", method!(Client::settle, 6))?;
    class.define_method("recover", method!(Client::recover, 0))?;
    class.define_method("job_state", method!(Client::job_state, 1))?;
    class.define_singleton_method("build", function!(Client::build, 5))?;
    Ok(())
}
