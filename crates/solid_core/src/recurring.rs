//! Recurring schedules, the part that needs no Redis: when a schedule's
//! ticks fall (a [`Schedule`]: `every:` or cron, both answering
//! `next_after` and `latest_at_or_before`), what a schedule enqueues
//! ([`RecurringSchedule`])
//! and what it does about ticks missed while no node ran ([`Missed`]).
//! The Redis side (the one script that enqueues a tick, the node's
//! scheduler thread) is `redis::scheduler`; docs/recurring.md and decision
//! 37 give the guarantees.

use serde_json::{Map, Value};

use crate::envelope::{validate_channel, validate_task_name, Envelope};
use crate::error::{Error, Result};
use crate::flow::{meta_into, FlowSpec};
use crate::schedule::Schedule;

/// A schedule's ticks from its configuration: `every` seconds, or a `cron`
/// spec in time zone `tz`; exactly one of the two, and a time zone only
/// with cron.
pub fn ticks_from(every: Option<u64>, cron: Option<&str>, tz: Option<&str>) -> Result<Schedule> {
    match (every, cron) {
        (Some(secs), None) if tz.is_none() => Ok(Schedule::every(secs)?),
        (Some(_), None) => Err(Error::Invalid("time_zone applies to cron schedules only, not every".into())),
        (None, Some(spec)) => Ok(Schedule::cron(spec, tz)?),
        (Some(_), Some(_)) => Err(Error::Invalid("give either every or cron, not both".into())),
        (None, None) => Err(Error::Invalid("give every: seconds or cron: \"spec\"".into())),
    }
}

/// What a schedule does about ticks no node enqueued on time (every node
/// or Redis was down at the tick).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// Enqueue the most recent missed tick once (the default), never the
    /// others: no burst after downtime.
    Latest,
    /// Enqueue nothing for missed ticks; the schedule resumes at its next.
    Skip,
}

impl Missed {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "latest" => Ok(Missed::Latest),
            "skip" => Ok(Missed::Skip),
            _ => Err(Error::Invalid(format!("missed must be latest or skip (got {s:?})"))),
        }
    }

    /// The argument `recurring.lua` reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Missed::Latest => "latest",
            Missed::Skip => "skip",
        }
    }
}

/// Longest schedule name: names appear inside keys, like channel names.
pub const MAX_NAME_LEN: usize = 100;

/// Largest JSON of a schedule's arguments: every node sends the whole
/// envelope with each proposal (every tick, decided or not), so large data
/// belongs in the app's storage, named by the arguments.
pub const MAX_ARGUMENTS_LEN: usize = 64 * 1024;

/// Schedule names share channel names' alphabet: they appear inside keys,
/// and a SCAN pattern must find exactly the schedules' keys.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "invalid schedule name {name:?}: expected 1-{MAX_NAME_LEN} characters from A-Z a-z 0-9 _ - ."
        )))
    }
}

/// One schedule as a node runs it: the ticks, and the template of the job
/// each tick enqueues (from Ruby at node start).
#[derive(Debug, Clone)]
pub struct RecurringSchedule {
    pub name: String,
    /// When its ticks fall; cheap to clone (a cron zone is shared).
    pub ticks: Schedule,
    pub task: String,
    /// A JSON array.
    pub arguments: Value,
    pub channel: String,
    pub max_failures: u32,
    pub missed: Missed,
    /// The task's concurrency limit, its key computed once from the fixed
    /// arguments (docs/flow-control.md), and the key's label; a tick over
    /// its limit waits like any job.
    pub flow: FlowSpec,
    pub flow_label: Option<String>,
}

impl RecurringSchedule {
    pub fn validate(&self) -> Result<()> {
        validate_name(&self.name)?;
        validate_task_name(&self.task)?;
        validate_channel(&self.channel)?;
        if !self.arguments.is_array() {
            return Err(Error::Invalid(format!("schedule {:?}: arguments must be an Array", self.name)));
        }
        let len = self.arguments.to_string().len();
        if len > MAX_ARGUMENTS_LEN {
            return Err(Error::Invalid(format!(
                "schedule {:?}: arguments are {len} bytes of JSON: at most {MAX_ARGUMENTS_LEN} (each proposal sends them; \
                 keep large data in the app's storage and pass its key)",
                self.name
            )));
        }
        // The template must make a valid envelope: checked once here, so a
        // tick never fails on it.
        self.envelope(0, 0).map(|_| ())
    }

    /// The job of tick `tick_ms`: an ordinary envelope (fresh id) whose
    /// `meta` names the schedule and the tick, never the task's arguments.
    pub fn envelope(&self, tick_ms: u64, now_ms: u64) -> Result<Envelope> {
        let mut meta = Map::new();
        meta.insert("schedule".into(), Value::String(self.name.clone()));
        meta.insert("tick_ms".into(), Value::from(tick_ms));
        meta_into(&mut meta, &self.flow, self.flow_label.as_deref())?;
        Envelope::build(&self.task, self.arguments.clone(), &self.channel, self.max_failures, now_ms, now_ms)?
            .with_meta(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(secs: u64) -> Result<Schedule> {
        ticks_from(Some(secs), None, None)
    }

    fn parse_cron(spec: &str, tz: Option<&str>) -> Result<Schedule> {
        ticks_from(None, Some(spec), tz)
    }

    #[test]
    fn every_ticks_are_epoch_multiples() {
        let e = every(30).unwrap();
        assert_eq!(e.latest_at_or_before(0), Some(0));
        assert_eq!(e.latest_at_or_before(29_999), Some(0));
        assert_eq!(e.latest_at_or_before(30_000), Some(30_000));
        assert_eq!(e.next_after(30_000), Some(60_000));
        assert_eq!(e.next_after(29_999), Some(30_000));
        for t in [1u64, 999, 1_764_460_812_345, 1_764_460_800_000] {
            let next = e.next_after(t).unwrap();
            let latest = e.latest_at_or_before(t).unwrap();
            assert!(next > t && latest <= t && next - latest == 30_000, "{t}");
            assert_eq!(next % 30_000, 0);
        }
    }

    #[test]
    fn every_refuses_zero_and_huge_periods() {
        assert!(every(0).is_err());
        let e = every(crate::schedule::MAX_EVERY_SECS + 1).unwrap_err();
        assert!(e.to_string().contains("from 1 to 31622400"), "{e}");
        assert!(every(crate::schedule::MAX_EVERY_SECS).is_ok());
        assert!(every(1).is_ok());
    }

    #[test]
    fn cron_schedules_come_from_the_schedule_module() {
        let paris = parse_cron("30 2 * * *", Some("Europe/Paris")).unwrap();
        // 2026-03-29 is the spring-forward day in Paris: 02:30 does not
        // exist and runs once, at 03:00 CEST (01:00 UTC).
        let before = 1_774_728_000_000; // 2026-03-28T20:00:00Z
        assert_eq!(paris.next_after(before), Some(1_774_746_000_000));
        let e = parse_cron("61 * * * *", None).unwrap_err();
        assert!(e.to_string().contains("minute"), "{e}");
        assert!(parse_cron("* * * * *", Some("Mars/Olympus")).is_err());
    }

    #[test]
    fn the_envelope_carries_schedule_and_tick_in_meta_only() {
        let s = RecurringSchedule {
            name: "heartbeat".into(),
            ticks: every(1).unwrap(),
            task: "Ping".into(),
            arguments: serde_json::json!([1, "a"]),
            channel: "default".into(),
            max_failures: 3,
            missed: Missed::Latest,
            flow: FlowSpec::default(),
            flow_label: None,
        };
        s.validate().unwrap();
        let env = s.envelope(5_000, 5_001).unwrap();
        assert_eq!(env.arguments, serde_json::json!([1, "a"]));
        let meta = env.meta.unwrap();
        assert_eq!(meta["schedule"], "heartbeat");
        assert_eq!(meta["tick_ms"], 5_000);
        assert_ne!(s.envelope(5_000, 5_001).unwrap().id, s.envelope(5_000, 5_001).unwrap().id);
    }

    #[test]
    fn a_limited_tasks_tick_carries_its_flow_after_schedule_and_tick() {
        let (flow, flow_label) = crate::flow::concurrency("Ping", 1, &serde_json::json!("k"));
        let s = RecurringSchedule {
            name: "heartbeat".into(),
            ticks: every(1).unwrap(),
            task: "Ping".into(),
            arguments: serde_json::json!([]),
            channel: "default".into(),
            max_failures: 3,
            missed: Missed::Latest,
            flow: flow.clone(),
            flow_label,
        };
        let env = s.envelope(5_000, 5_001).unwrap();
        let meta = env.meta.as_ref().unwrap();
        assert_eq!(meta.keys().collect::<Vec<_>>(), ["schedule", "tick_ms", "flow_label", "flow"]);
        assert_eq!(crate::flow::parse(env.meta.as_ref()), flow);
    }

    #[test]
    fn ticks_from_routes_every_and_cron() {
        assert_eq!(ticks_from(Some(5), None, None).unwrap().next_after(0), Some(5_000));
        assert_eq!(ticks_from(None, Some("*/5 * * * *"), None).unwrap().next_after(0), Some(300_000));
        assert!(ticks_from(Some(5), Some("* * * * *"), None).is_err());
        assert!(ticks_from(None, None, None).is_err());
        assert!(ticks_from(Some(5), None, Some("UTC")).is_err());
    }

    #[test]
    fn large_arguments_are_refused() {
        let mut s = RecurringSchedule {
            name: "big".into(),
            ticks: Schedule::every(1).unwrap(),
            task: "Ping".into(),
            arguments: serde_json::json!(["x".repeat(MAX_ARGUMENTS_LEN)]),
            channel: "default".into(),
            max_failures: 3,
            missed: Missed::Latest,
            flow: FlowSpec::default(),
            flow_label: None,
        };
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("at most 65536") && e.len() < 300, "{e}");
        s.arguments = serde_json::json!(["x".repeat(MAX_ARGUMENTS_LEN - 10)]);
        s.validate().unwrap();
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("nightly-report").is_ok());
        assert!(validate_name("a.b_c-d").is_ok());
        assert!(validate_name("a:b").is_err());
        assert!(validate_name("").is_err());
        assert!(validate_name("has space").is_err());
        assert!(validate_name("pipe|d").is_err());
        assert!(validate_name(&"x".repeat(101)).is_err());
    }

    #[test]
    fn missed_parses() {
        assert_eq!(Missed::parse("latest").unwrap(), Missed::Latest);
        assert_eq!(Missed::parse("skip").unwrap(), Missed::Skip);
        assert!(Missed::parse("all").is_err());
    }
}
