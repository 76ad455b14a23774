//! `SolidJobs::Native::EngineClient`: the producer and inspection side of
//! the SolidEngine backend. One frozen, shareable instance serves every
//! Ractor; connections come from a checkout pool.

use magnus::scan_args::scan_args;
use magnus::{function, method, prelude::*, Error, RArray, RModule, Ruby, Value};
use solid_core::engine::wire;
use solid_core::redis::connection::Pool;

use crate::helpers::envelopes::{build_envelope, parse_envelopes};
use crate::helpers::errors::to_ruby as err;
use crate::helpers::nogvl::without_gvl;
use crate::helpers::raw_command::raw_call;
use crate::helpers::settings::timeouts;

#[magnus::wrap(class = "SolidJobs::Native::EngineClient", free_immediately, size, frozen_shareable)]
pub struct EngineClient {
    pool: Pool,
    url: String,
}

impl EngineClient {
    /// new(url, password, timeouts = nil): `timeouts` as for `Client.new`.
    fn new(ruby: &Ruby, args: &[Value]) -> Result<Self, Error> {
        let args = scan_args::<(String, Option<String>), (Option<Value>,), (), (), (), ()>(args)?;
        let (url, password) = args.required;
        let connector = wire::connector(&url, password.as_deref(), timeouts(ruby, args.optional.0)?).map_err(err)?;
        Ok(EngineClient { pool: Pool::new(connector), url })
    }

    fn url(&self) -> String {
        self.url.clone()
    }

    /// `due_ms` is on this process's clock; only the delay it implies is
    /// sent, and the server counts it on its own clock.
    fn write(&self, channel_id: u32, due_ms: Option<u64>, jobs: Vec<(String, Vec<u8>)>) -> Result<(), Error> {
        let now = solid_core::now_ms();
        let delay = due_ms.filter(|d| *d > now).map(|d| std::time::Duration::from_millis(d - now));
        without_gvl(|_| self.pool.with(|c| wire::push_many(c, channel_id, delay, &jobs)))?.map_err(err)?;
        Ok(())
    }

    /// push(channel_id, task, arguments, channel, max_failures, due_ms) -> id
    #[allow(clippy::too_many_arguments)]
    fn push(
        ruby: &Ruby,
        rb_self: &Self,
        channel_id: u32,
        task: String,
        arguments: Value,
        channel: String,
        max_failures: u32,
        due_ms: Option<u64>,
    ) -> Result<String, Error> {
        let env = build_envelope(ruby, &task, arguments, &channel, max_failures, due_ms, "arguments")?;
        rb_self.write(channel_id, due_ms, vec![(env.id.clone(), env.encode().into_bytes())])?;
        Ok(env.id)
    }

    /// push_many(channel_id, task, [arguments...], channel, max_failures, due_ms) -> ids
    #[allow(clippy::too_many_arguments)]
    fn push_many(
        ruby: &Ruby,
        rb_self: &Self,
        channel_id: u32,
        task: String,
        lists: RArray,
        channel: String,
        max_failures: u32,
        due_ms: Option<u64>,
    ) -> Result<Vec<String>, Error> {
        let mut jobs = Vec::with_capacity(lists.len());
        for (i, args) in lists.into_iter().enumerate() {
            let env =
                build_envelope(ruby, &task, args, &channel, max_failures, due_ms, &format!("arguments of job {i}"))?;
            jobs.push((env.id.clone(), env.encode().into_bytes()));
        }
        let ids = jobs.iter().map(|(id, _)| id.clone()).collect();
        if !jobs.is_empty() {
            rb_self.write(channel_id, due_ms, jobs)?;
        }
        Ok(ids)
    }

    /// push_envelopes(channel_id, [envelope Hash...], due_ms) -> ids; every
    /// envelope must belong to that channel.
    fn push_envelopes(
        ruby: &Ruby,
        rb_self: &Self,
        channel_id: u32,
        envelopes: RArray,
        due_ms: Option<u64>,
    ) -> Result<Vec<String>, Error> {
        let envs = parse_envelopes(ruby, envelopes)?;
        let ids = envs.iter().map(|e| e.id.clone()).collect();
        let jobs = envs.into_iter().map(|e| (e.id.clone(), e.encode().into_bytes())).collect::<Vec<_>>();
        if !jobs.is_empty() {
            rb_self.write(channel_id, due_ms, jobs)?;
        }
        Ok(ids)
    }

    /// get(id) -> nil or [id, channel_id, state, attempts, payload, due_ms or nil]
    fn get(ruby: &Ruby, rb_self: &Self, id: String) -> Result<Value, Error> {
        if !wire::is_job_id(&id) {
            return Ok(ruby.qnil().as_value());
        }
        let info = without_gvl(|_| rb_self.pool.with(|c| wire::get(c, &id)))?.map_err(err)?;
        Ok(match info {
            None => ruby.qnil().as_value(),
            Some(j) => {
                let a = ruby.ary_new();
                a.push(j.id)?;
                a.push(j.channel_id)?;
                a.push(j.state)?;
                a.push(j.attempts)?;
                a.push(ruby.str_from_slice(&j.payload))?;
                a.push(j.due_ms)?;
                a.as_value()
            }
        })
    }

    /// fetch_one(channel_id, lease_ms) -> [id, fence, attempts, payload] or nil
    fn fetch_one(ruby: &Ruby, rb_self: &Self, channel_id: u32, lease_ms: u64) -> Result<Value, Error> {
        let got =
            without_gvl(|_| rb_self.pool.with(|c| wire::fetch(c, 1, lease_ms, 0, &[channel_id])))?.map_err(err)?;
        Ok(match got.into_iter().next() {
            None => ruby.qnil().as_value(),
            Some(r) => {
                let a = ruby.ary_new();
                a.push(r.job_id)?;
                a.push(r.fence)?;
                a.push(r.attempts)?;
                a.push(ruby.str_from_slice(&r.payload))?;
                a.as_value()
            }
        })
    }

    // One method per outcome of a reservation, so no action string can be
    // misspelt into another outcome. Each raises StaleClaimError, and
    // changes nothing, when `fence` is no longer the job's current one.

    /// settle_ack(id, fence): the job is done.
    fn settle_ack(&self, id: String, fence: u64) -> Result<(), Error> {
        without_gvl(|_| self.pool.with(|c| wire::ack(c, &id, fence)))?.map_err(err)
    }

    /// settle_retry(id, fence, delay_ms): the job is scheduled again.
    fn settle_retry(&self, id: String, fence: u64, delay_ms: u64) -> Result<(), Error> {
        without_gvl(|_| self.pool.with(|c| wire::retry(c, &id, fence, delay_ms)))?.map_err(err)
    }

    /// settle_fail(id, fence, reason): the job becomes dead.
    fn settle_fail(&self, id: String, fence: u64, reason: String) -> Result<(), Error> {
        without_gvl(|_| self.pool.with(|c| wire::fail(c, &id, fence, &reason)))?.map_err(err)
    }

    /// extend_lease(id, fence, lease_ms): the reservation stays current for
    /// another `lease_ms`.
    fn extend_lease(&self, id: String, fence: u64, lease_ms: u64) -> Result<(), Error> {
        without_gvl(|_| self.pool.with(|c| wire::extend(c, &id, fence, lease_ms)))?.map_err(err)
    }

    /// cancel(id) -> true when a waiting job was cancelled, false when the
    /// id is unknown, finished or already cancelled; raises JobRunning
    /// when it is reserved.
    fn cancel(&self, id: String) -> Result<bool, Error> {
        if !wire::is_job_id(&id) {
            return Ok(false);
        }
        without_gvl(|_| self.pool.with(|c| wire::cancel(c, &id)))?.map_err(err)
    }

    /// call([command, arg...]) -> reply: a raw command, for tools and tests.
    fn call(&self, args: RArray) -> Result<Value, Error> {
        raw_call(&self.pool, args)
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("EngineClient", ruby.class_object())?;
    class.define_singleton_method("new", function!(EngineClient::new, -1))?;
    class.define_method("url", method!(EngineClient::url, 0))?;
    class.define_method("push", method!(EngineClient::push, 6))?;
    class.define_method("push_many", method!(EngineClient::push_many, 6))?;
    class.define_method("push_envelopes", method!(EngineClient::push_envelopes, 3))?;
    class.define_method("get", method!(EngineClient::get, 1))?;
    class.define_method("cancel", method!(EngineClient::cancel, 1))?;
    class.define_method("fetch_one", method!(EngineClient::fetch_one, 2))?;
    class.define_method("settle_ack", method!(EngineClient::settle_ack, 2))?;
    class.define_method("settle_retry", method!(EngineClient::settle_retry, 3))?;
    class.define_method("settle_fail", method!(EngineClient::settle_fail, 3))?;
    class.define_method("extend_lease", method!(EngineClient::extend_lease, 3))?;
    class.define_method("call", method!(EngineClient::call, 1))?;
    Ok(())
}
