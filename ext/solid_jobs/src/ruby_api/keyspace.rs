//! `SolidJobs::Native::Keyspace`: the Redis key names for one namespace, as
//! `solid_core::redis::keyspace` builds them for the scripts. Ruby code that reads
//! keys directly (read APIs, integrity check, dashboard) names them through
//! this class, so Ruby and Rust cannot disagree about a key. Instances are
//! frozen when built and wrap an immutable value, so one can be shared by
//! every Ractor.

use magnus::{function, method, prelude::*, typed_data::Obj, Error, RModule, Ruby};
use solid_core::redis::keyspace::Keyspace as Keys;

#[magnus::wrap(class = "SolidJobs::Native::Keyspace", free_immediately, size, frozen_shareable)]
pub struct Keyspace(Keys);

impl Keyspace {
    fn new(ruby: &Ruby, namespace: String) -> Obj<Keyspace> {
        let obj = ruby.obj_wrap(Keyspace(Keys::new(&namespace)));
        // Frozen here, not by the caller: `frozen_shareable` only makes a
        // frozen object shareable, and a keyspace has no state to change.
        obj.freeze();
        obj
    }

    fn prefix(&self) -> String {
        self.0.prefix().to_owned()
    }
    fn channel(&self, name: String) -> String {
        self.0.channel(&name)
    }
    fn channels(&self) -> String {
        self.0.channels()
    }
    fn planned(&self) -> String {
        self.0.planned()
    }
    fn retrying(&self) -> String {
        self.0.retrying()
    }
    fn attempts(&self) -> String {
        self.0.attempts()
    }
    fn archive(&self) -> String {
        self.0.archive()
    }
    fn archive_entries(&self) -> String {
        self.0.archive_entries()
    }
    fn claims(&self, node_id: String) -> String {
        self.0.claims(&node_id)
    }
    fn node(&self, node_id: String) -> String {
        self.0.node(&node_id)
    }
    fn nodes(&self) -> String {
        self.0.nodes()
    }
    fn jobs(&self) -> String {
        self.0.jobs()
    }
    fn cancelling(&self) -> String {
        self.0.cancelling()
    }
    fn settled(&self, token: u64) -> String {
        self.0.settled(token)
    }
    fn fence(&self) -> String {
        self.0.fence()
    }
    fn holding(&self, node_id: String) -> String {
        self.0.holding(&node_id)
    }
    fn acked(&self, node_id: String) -> String {
        self.0.acked(&node_id)
    }

    fn completed(&self) -> String {
        self.0.completed()
    }
    fn unique(&self, hex: String) -> String {
        self.0.unique(&hex)
    }
    fn unique_pattern(&self) -> String {
        self.0.unique_pattern()
    }
    fn slots(&self, hex: String) -> String {
        self.0.slots(&hex)
    }
    fn blocked(&self, hex: String) -> String {
        self.0.blocked(&hex)
    }
    fn slots_pattern(&self) -> String {
        self.0.slots_pattern()
    }
    fn blocked_pattern(&self) -> String {
        self.0.blocked_pattern()
    }
    // >>> rate limits
    fn rate(&self, hex: String) -> String {
        self.0.rate(&hex)
    }
    fn throttled(&self, hex: String) -> String {
        self.0.throttled(&hex)
    }
    fn throttled_pattern(&self) -> String {
        self.0.throttled_pattern()
    }
    fn rate_pattern(&self) -> String {
        self.0.rate_pattern()
    }
    fn flow_wake(&self) -> String {
        self.0.flow_wake()
    }
    // <<< rate limits
    fn incarnation(&self) -> String {
        self.0.incarnation()
    }
    fn metric(&self, name: String) -> String {
        self.0.metric(&name)
    }
    fn doorbell(&self) -> String {
        self.0.doorbell()
    }
    fn publishing(&self) -> String {
        self.0.publishing()
    }
    fn telemetry(&self) -> String {
        self.0.telemetry()
    }
    fn observations(&self, node_id: String) -> String {
        self.0.observations(&node_id)
    }
    fn control(&self, node_id: String) -> String {
        self.0.control(&node_id)
    }
    fn backtraces(&self, node_id: String) -> String {
        self.0.backtraces(&node_id)
    }
    fn tasks(&self) -> String {
        self.0.tasks()
    }
    fn flow(&self, channel: String) -> String {
        self.0.flow(&channel)
    }
    fn paused(&self) -> String {
        self.0.paused()
    }
    fn channel_pattern(&self) -> String {
        self.0.channel_pattern()
    }
    fn claims_pattern(&self) -> String {
        self.0.claims_pattern()
    }
    fn observations_pattern(&self) -> String {
        self.0.observations_pattern()
    }
    fn recurring(&self, name: String) -> String {
        self.0.recurring(&name)
    }
    fn recurring_pattern(&self) -> String {
        self.0.recurring_pattern()
    }
}

pub fn init(ruby: &Ruby, native: RModule) -> Result<(), Error> {
    let class = native.define_class("Keyspace", ruby.class_object())?;
    class.define_singleton_method("new", function!(Keyspace::new, 1))?;
    class.define_method("prefix", method!(Keyspace::prefix, 0))?;
    class.define_method("channel", method!(Keyspace::channel, 1))?;
    class.define_method("channels", method!(Keyspace::channels, 0))?;
    class.define_method("planned", method!(Keyspace::planned, 0))?;
    class.define_method("retrying", method!(Keyspace::retrying, 0))?;
    class.define_method("attempts", method!(Keyspace::attempts, 0))?;
    class.define_method("archive", method!(Keyspace::archive, 0))?;
    class.define_method("archive_entries", method!(Keyspace::archive_entries, 0))?;
    class.define_method("claims", method!(Keyspace::claims, 1))?;
    class.define_method("node", method!(Keyspace::node, 1))?;
    class.define_method("nodes", method!(Keyspace::nodes, 0))?;
    class.define_method("jobs", method!(Keyspace::jobs, 0))?;
    class.define_method("cancelling", method!(Keyspace::cancelling, 0))?;
    class.define_method("settled", method!(Keyspace::settled, 1))?;
    class.define_method("fence", method!(Keyspace::fence, 0))?;
    class.define_method("holding", method!(Keyspace::holding, 1))?;
    class.define_method("acked", method!(Keyspace::acked, 1))?;
    class.define_method("completed", method!(Keyspace::completed, 0))?;
    class.define_method("unique", method!(Keyspace::unique, 1))?;
    class.define_method("unique_pattern", method!(Keyspace::unique_pattern, 0))?;
    class.define_method("slots", method!(Keyspace::slots, 1))?;
    class.define_method("blocked", method!(Keyspace::blocked, 1))?;
    class.define_method("slots_pattern", method!(Keyspace::slots_pattern, 0))?;
    class.define_method("blocked_pattern", method!(Keyspace::blocked_pattern, 0))?;
    class.define_method("rate", method!(Keyspace::rate, 1))?;
    class.define_method("throttled", method!(Keyspace::throttled, 1))?;
    class.define_method("throttled_pattern", method!(Keyspace::throttled_pattern, 0))?;
    class.define_method("flow_wake", method!(Keyspace::flow_wake, 0))?;
    class.define_method("rate_pattern", method!(Keyspace::rate_pattern, 0))?;
    class.define_method("incarnation", method!(Keyspace::incarnation, 0))?;
    class.define_method("metric", method!(Keyspace::metric, 1))?;
    class.define_method("doorbell", method!(Keyspace::doorbell, 0))?;
    class.define_method("publishing", method!(Keyspace::publishing, 0))?;
    class.define_method("telemetry", method!(Keyspace::telemetry, 0))?;
    class.define_method("observations", method!(Keyspace::observations, 1))?;
    class.define_method("control", method!(Keyspace::control, 1))?;
    class.define_method("backtraces", method!(Keyspace::backtraces, 1))?;
    class.define_method("tasks", method!(Keyspace::tasks, 0))?;
    class.define_method("channel_pattern", method!(Keyspace::channel_pattern, 0))?;
    class.define_method("claims_pattern", method!(Keyspace::claims_pattern, 0))?;
    class.define_method("observations_pattern", method!(Keyspace::observations_pattern, 0))?;
    class.define_method("recurring", method!(Keyspace::recurring, 1))?;
    class.define_method("recurring_pattern", method!(Keyspace::recurring_pattern, 0))?;
    class.define_method("flow", method!(Keyspace::flow, 1))?;
    class.define_method("paused", method!(Keyspace::paused, 0))?;
    Ok(())
}
