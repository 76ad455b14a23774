//! Command -> engine -> reply. The only place where protocol commands meet
//! the engine; auth is checked here, durability tickets are collected here
//! (the connection confirms them before replies are written).

use std::time::{Duration, Instant};

use super::Shared;
use crate::command::{stats_text, Command, Reply};
use crate::engine::{Engine, Event};
use crate::error::Error;

/// Per-connection state that commands read or change.
pub(crate) struct Session {
    pub authed: bool,
    /// Highest log ticket of this connection's unconfirmed changes.
    pub ticket: u64,
    events: Vec<Event>,
}

impl Session {
    pub(crate) fn new(authed: bool) -> Self {
        Session { authed, ticket: 0, events: Vec::new() }
    }
}

pub(crate) enum Flow {
    Continue,
    Close,
}

/// Runs `op` under the engine lock with the current time, and queues the
/// events it journaled to the log while still under the lock (so log order
/// is engine order).
///
/// Every reply waits for the log as far as it stood when the reply was
/// computed, not only for the command's own records: a reply that changed
/// nothing (a duplicate PUSH's `:0`, `CANCEL`'s `:0`, GET) still reports
/// state that another connection's unconfirmed record created, and must not
/// be sent before that record is as durable as the mode promises.
fn with_engine<T>(shared: &Shared, session: &mut Session, op: impl FnOnce(&mut Engine, u64) -> T) -> T {
    let mut engine = shared.engine.lock();
    // Read under the lock, so a command that waited for it is judged at the
    // time it runs (lease deadlines).
    let now = shared.clock.now_ms();
    let out = op(&mut engine, now);
    if let Some(storage) = &shared.storage {
        engine.take_events(&mut session.events);
        if !session.events.is_empty() {
            storage.append(&session.events);
            session.events.clear();
        }
        session.ticket = session.ticket.max(storage.appended_end());
    }
    out
}

fn unit(result: Result<(), Error>) -> Reply {
    match result {
        Ok(()) => Reply::Ok,
        Err(e) => Reply::Error(e),
    }
}

/// Executes one command. `before_block` is called once before a FETCH
/// starts waiting, so replies already produced are not held back.
pub(crate) fn execute(
    shared: &Shared,
    session: &mut Session,
    command: Command,
    before_block: &mut dyn FnMut(&mut Session),
) -> (Reply, Flow) {
    if !session.authed && !command.allowed_without_auth() {
        return (Reply::Error(Error::NoAuth), Flow::Continue);
    }
    let reply = match command {
        Command::Ping(None) => Reply::Pong,
        Command::Ping(Some(message)) => Reply::Bulk(message),
        Command::Auth(password) => match &shared.config.password {
            Some(expected) if !constant_time_eq(expected.as_bytes(), &password) => Reply::Error(Error::WrongPass),
            _ => {
                session.authed = true;
                Reply::Ok
            }
        },
        Command::Client | Command::Select => Reply::Ok,
        Command::Quit => return (Reply::Ok, Flow::Close),
        Command::Push { channel, id, payload, due } => {
            let created =
                with_engine(shared, session, |e, now| e.push(now, channel, id, payload, due.map(|d| d.at(now))));
            if created {
                shared.notifier.notify();
            }
            Reply::Int(i64::from(created))
        }
        Command::PushMany { channel, due, jobs } => {
            let created = with_engine(shared, session, |e, now| e.push_many(now, channel, due.at(now), jobs));
            if created > 0 {
                shared.notifier.notify();
            }
            Reply::Int(created as i64)
        }
        Command::Fetch { count, lease_ms, block_ms, channels } => {
            fetch(shared, session, count, lease_ms, block_ms, &channels, before_block)
        }
        Command::Ack { id, fence } => unit(with_engine(shared, session, |e, now| e.ack(now, id, fence))),
        Command::AckMany(pairs) => {
            let acked = with_engine(shared, session, |e, now| e.ack_many(now, &pairs));
            Reply::Ints(acked)
        }
        Command::Retry { id, fence, delay_ms } => {
            let result = with_engine(shared, session, |e, now| e.retry(now, id, fence, delay_ms));
            if result.is_ok() {
                shared.notifier.notify();
            }
            unit(result)
        }
        Command::Fail { id, fence, reason } => {
            unit(with_engine(shared, session, |e, now| e.fail(now, id, fence, reason)))
        }
        Command::Extend { id, fence, lease_ms } => {
            unit(with_engine(shared, session, |e, now| e.extend(now, id, fence, lease_ms)))
        }
        Command::Release { id, fence } => {
            let result = with_engine(shared, session, |e, now| e.release(now, id, fence));
            if result.is_ok() {
                shared.notifier.notify();
            }
            unit(result)
        }
        Command::ReleaseMany(pairs) => {
            let released = with_engine(shared, session, |e, now| e.release_many(now, &pairs));
            if released.contains(&true) {
                shared.notifier.notify();
            }
            Reply::Ints(released.into_iter().map(i64::from).collect())
        }
        Command::Get(id) => match with_engine(shared, session, |e, now| e.get(now, id)) {
            Some(job) => Reply::Job(job),
            None => Reply::Nil,
        },
        Command::Cancel(id) => match with_engine(shared, session, |e, now| e.cancel(now, id)) {
            Ok(cancelled) => Reply::Int(i64::from(cancelled)),
            Err(e) => Reply::Error(e),
        },
        Command::Dead(count) => Reply::Dead(with_engine(shared, session, |e, _| e.dead(count))),
        Command::Stats => {
            let stats = with_engine(shared, session, |e, _| e.stats());
            let durability = shared.storage.as_ref().map_or("memory", |s| s.durability().name());
            let uptime = shared.started.elapsed().as_secs();
            Reply::Bulk(stats_text(&stats, shared.tracker.count(), durability, uptime, shared.compaction_stats()))
        }
        // Under its own lock, not the engine's: presence is not job state
        // and is never logged (crate::presence).
        Command::Node { node_id, ttl_ms, description } => {
            unit(shared.presence.lock().announce(shared.clock.now_ms(), node_id, ttl_ms, description))
        }
        Command::Nodes => Reply::Nodes(shared.presence.lock().list(shared.clock.now_ms())),
        #[cfg(test)]
        Command::DebugPanic => panic!("DEBUG PANIC: injected by a test"),
    };
    (reply, Flow::Continue)
}

/// FETCH: reserve at once, or wait (without any lock) for a push, a lease
/// expiry or a due job, up to `block_ms`; shutdown ends the wait.
fn fetch(
    shared: &Shared,
    session: &mut Session,
    count: usize,
    lease_ms: u64,
    block_ms: u64,
    channels: &[u32],
    before_block: &mut dyn FnMut(&mut Session),
) -> Reply {
    let give_up = Instant::now() + Duration::from_millis(block_ms);
    let mut flushed = false;
    loop {
        let mut reserved = Vec::new();
        let (seen, next_due) = with_engine(shared, session, |e, now| {
            e.fetch(now, count, lease_ms, channels, &mut reserved);
            // Read under the engine lock: see the module doc of `wait`.
            (shared.notifier.generation(), e.next_deadline().map(|t| t.saturating_sub(now)))
        });
        let now = Instant::now();
        if !reserved.is_empty() || block_ms == 0 || now >= give_up || shared.notifier.is_shutdown() {
            return Reply::Reservations(reserved);
        }
        if !flushed {
            before_block(session);
            flushed = true;
        }
        let until = match next_due {
            Some(ms) => give_up.min(now + Duration::from_millis(ms.max(1))),
            None => give_up,
        };
        shared.notifier.wait(seen, until);
    }
}

/// Compares without an early exit, so timing does not reveal a prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, &x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}
