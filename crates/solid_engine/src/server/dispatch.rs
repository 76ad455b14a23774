//! Command -> engine -> reply. The only place where protocol commands meet
//! the engine; auth is checked here, durability tickets are collected here
//! (the connection confirms them before replies are written).

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::wait::Wake;
use super::Shared;
use crate::command::{stats_text, Command, Reply};
use crate::engine::{Engine, Event};
use crate::error::Error;

/// Per-connection state that commands read or change.
pub(crate) struct Session {
    pub authed: bool,
    /// Replies in RESP3 (after `HELLO 3`).
    pub resp3: bool,
    /// The connection's id (HELLO reports it).
    pub id: u64,
    /// Highest log ticket of this connection's unconfirmed changes.
    pub ticket: u64,
    events: Vec<Event>,
    /// (channel, jobs) made ready by this session's last engine call.
    readied: Vec<(u32, usize)>,
    /// The client's socket, polled for hang-up while a FETCH is blocked.
    peer: Option<RawFd>,
}

impl Session {
    pub(crate) fn new(authed: bool, id: u64) -> Self {
        Session { authed, resp3: false, id, ticket: 0, events: Vec::new(), readied: Vec::new(), peer: None }
    }

    /// Blocked FETCHes of this session watch `fd` for the client hanging up.
    pub(crate) fn watch(&mut self, fd: RawFd) {
        self.peer = Some(fd);
    }

    fn hung_up(&self) -> bool {
        self.peer.is_some_and(hung_up)
    }
}

/// How often a blocked FETCH looks at its socket for a hang-up when no job
/// wakes it: frees a dead client's connection and thread within this long.
const HANGUP_POLL: Duration = Duration::from_secs(1);

/// Whether the peer closed the connection (or at least its sending side:
/// a client that will send nothing more is gone for a FETCH). Linux reports
/// it with POLLRDHUP even when unread requests are queued; elsewhere an
/// end of input with nothing queued before it is what can be seen.
fn hung_up(fd: RawFd) -> bool {
    #[cfg(target_os = "linux")]
    let events = libc::POLLRDHUP;
    #[cfg(not(target_os = "linux"))]
    let events = libc::POLLIN;
    let mut pfd = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one valid pollfd, zero timeout; `fd` stays open for the
    // session's life (the connection owns it).
    if unsafe { libc::poll(&mut pfd, 1, 0) } != 1 {
        return false;
    }
    if pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
        return true;
    }
    #[cfg(target_os = "linux")]
    return pfd.revents & libc::POLLRDHUP != 0;
    #[cfg(not(target_os = "linux"))]
    {
        let mut byte = 0u8;
        // SAFETY: a one-byte buffer we own; MSG_PEEK leaves the data queued.
        let n = unsafe { libc::recv(fd, (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        n == 0
    }
}

pub(crate) enum Flow {
    Continue,
    Close,
    /// A wrong password: the connection answers after the failure delay
    /// and closes, so each guess costs a connection and the delay.
    AuthFailed,
}

/// AUTH (or HELLO AUTH): whether `password` opens the session.
fn authenticate(shared: &Shared, session: &mut Session, password: &[u8]) -> bool {
    match &shared.config.password {
        Some(expected) if !constant_time_eq(expected.as_bytes(), password) => false,
        _ => {
            session.authed = true;
            true
        }
    }
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
///
/// Jobs the operation made ready (its own, or due ones its tick promoted)
/// wake blocked FETCHes of their channels once the lock is released.
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
    engine.take_readied(&mut session.readied);
    drop(engine);
    if !session.readied.is_empty() {
        shared.notifier.notify(&session.readied);
        session.readied.clear();
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
        Command::Auth(password) => {
            if !authenticate(shared, session, &password) {
                return (Reply::Error(Error::WrongPass), Flow::AuthFailed);
            }
            Reply::Ok
        }
        Command::Hello { proto, auth } => {
            if let Some(password) = auth {
                if !authenticate(shared, session, &password) {
                    return (Reply::Error(Error::WrongPass), Flow::AuthFailed);
                }
            }
            // As in Redis: the handshake reveals nothing before the client
            // has proven it knows the password.
            if !session.authed {
                return (Reply::Error(Error::NoAuth), Flow::Continue);
            }
            if let Some(proto) = proto {
                session.resp3 = proto == 3;
            }
            Reply::Hello { resp3: session.resp3, id: session.id }
        }
        Command::Client | Command::Select => Reply::Ok,
        Command::Quit => return (Reply::Ok, Flow::Close),
        Command::Push { channel, id, payload, due } => {
            let created =
                with_engine(shared, session, |e, now| e.push(now, channel, id, payload, due.map(|d| d.at(now))));
            Reply::Int(i64::from(created))
        }
        Command::PushMany { channel, due, jobs } => {
            let created = with_engine(shared, session, |e, now| e.push_many(now, channel, due.at(now), jobs));
            Reply::Int(created as i64)
        }
        Command::Fetch { count, lease_ms, block_ms, channels } => {
            return fetch(shared, session, count, lease_ms, block_ms, &channels, before_block);
        }
        Command::Ack { id, fence } => unit(with_engine(shared, session, |e, now| e.ack(now, id, fence))),
        Command::AckMany(pairs) => {
            let acked = with_engine(shared, session, |e, now| e.ack_many(now, &pairs));
            Reply::Ints(acked)
        }
        Command::Retry { id, fence, delay_ms } => {
            unit(with_engine(shared, session, |e, now| e.retry(now, id, fence, delay_ms)))
        }
        Command::Fail { id, fence, reason } => {
            unit(with_engine(shared, session, |e, now| e.fail(now, id, fence, reason)))
        }
        Command::Extend { id, fence, lease_ms } => {
            unit(with_engine(shared, session, |e, now| e.extend(now, id, fence, lease_ms)))
        }
        Command::Release { id, fence } => unit(with_engine(shared, session, |e, now| e.release(now, id, fence))),
        Command::ReleaseMany(pairs) => {
            let released = with_engine(shared, session, |e, now| e.release_many(now, &pairs));
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
        Command::Channels(only) => Reply::Channels(with_engine(shared, session, |e, now| e.channels(now, &only))),
        Command::Stats => {
            let stats = with_engine(shared, session, |e, _| e.stats());
            let durability = shared.storage.as_ref().map_or("memory", |s| s.durability().name());
            let uptime = shared.started.elapsed().as_secs();
            let (connections, blocked) = (shared.tracker.count(), shared.notifier.waiting());
            Reply::Bulk(stats_text(&stats, connections, blocked, durability, uptime, shared.compaction_stats()))
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

/// FETCH: reserve at once, or wait (without the engine lock) until a job
/// of `channels` is made ready for this waiter, up to `block_ms`; shutdown
/// ends the wait.
///
/// A due job or an expired lease is made ready by the next engine
/// operation or housekeeping tick (every `HOUSEKEEPING_INTERVAL`), which
/// wakes a waiter the same way a PUSH does.
///
/// A client that hung up while blocked reserves nothing: the socket is
/// checked when a job wakes the waiter (the wake-up then goes to the next
/// waiter) and every [`HANGUP_POLL`] meanwhile; the connection is closed.
fn fetch(
    shared: &Shared,
    session: &mut Session,
    count: usize,
    lease_ms: u64,
    block_ms: u64,
    channels: &[u32],
    before_block: &mut dyn FnMut(&mut Session),
) -> (Reply, Flow) {
    let give_up = Instant::now() + Duration::from_millis(block_ms);
    let mut flushed = false;
    loop {
        let mut reserved = Vec::new();
        let block = block_ms > 0 && Instant::now() < give_up && !shared.notifier.is_shutdown();
        let slot = with_engine(shared, session, |e, now| {
            e.fetch(now, count, lease_ms, channels, &mut reserved);
            // Registered under the engine lock: see the module doc of `wait`.
            (reserved.is_empty() && block && flushed).then(|| shared.notifier.register(channels, count))
        });
        if !reserved.is_empty() || !block {
            return (Reply::Reservations(reserved), Flow::Continue);
        }
        let Some(slot) = slot else {
            // Replies before this FETCH go out first, and before it queues:
            // a waiter stuck writing to a client that does not read would
            // take a job's wake-up from a waiter that is ready for it.
            before_block(session);
            flushed = true;
            continue;
        };
        loop {
            match shared.notifier.wait(&slot, give_up.min(Instant::now() + HANGUP_POLL)) {
                Wake::Shutdown => break,
                Wake::Woken(channel) => {
                    if session.hung_up() {
                        shared.notifier.pass_on(&slot, channel);
                        return (Reply::Reservations(Vec::new()), Flow::Close);
                    }
                    break;
                }
                Wake::TimedOut => {
                    let gone = session.hung_up();
                    if !gone && Instant::now() < give_up {
                        continue;
                    }
                    let woken = shared.notifier.cancel(&slot);
                    if gone {
                        if let Some(channel) = woken {
                            shared.notifier.pass_on(&slot, channel);
                        }
                        return (Reply::Reservations(Vec::new()), Flow::Close);
                    }
                    // Past `give_up`: one last fetch, which does not block.
                    break;
                }
            }
        }
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
