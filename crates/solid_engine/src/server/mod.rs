//! The server: accept loops, one thread per connection, housekeeping, and
//! graceful shutdown.
//!
//! Guarantees:
//! - `run` takes listeners that are already bound (tests bind port 0 or a
//!   temporary socket path) and returns after shutdown is complete: no new
//!   connections, in-flight requests answered, blocked FETCHes returned
//!   empty, log flushed and fsync'd, Unix socket files removed.
//! - A panic while serving one connection is caught and closes only that
//!   connection. Locks are parking_lot locks, which are not poisoned. (A
//!   panic *inside* an engine operation would leave that one operation
//!   half-applied; the engine is kept panic-free by its tests and the
//!   protocol fuzzer, which drives it with every parsed command.)
//! - Over `max_connections`, a new connection gets `-MAXCONN ...` and is
//!   closed; the others are unaffected. Connections still in their
//!   handshake have a cap of their own (`max_unauthenticated`) and a
//!   deadline (`handshake_timeout_ms`), so idle or unauthenticated sockets
//!   never take an authenticated client's slot.
//! - Housekeeping (lease expiry, promotion, pruning, balanced-mode fsync,
//!   compaction) runs on one thread every [`HOUSEKEEPING_INTERVAL`]; the
//!   engine also applies expiry and promotion lazily on every operation.

mod conn;
mod dispatch;
mod listener;
mod wait;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::Shutdown;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

pub use listener::{bind_all, Listener, ShutdownHandle};

use crate::clock::Clock;
use crate::command::{CompactionStats, Reply};
use crate::config::Config;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::presence::Presence;
use crate::storage::{CompactionStep, Durability, Storage};
use listener::Stream;
use wait::Notifier;

pub const HOUSEKEEPING_INTERVAL: Duration = Duration::from_millis(10);
/// How long shutdown waits for connections to finish their request.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Live connections, in two classes: those still in their handshake
/// (`pending`, oldest first) and established ones. The classes have their
/// own caps, so connections that never authenticate cannot use up the slots
/// of those that did: a full pending class makes room by closing its oldest
/// member (a real client finishes its handshake in a round trip; what is
/// still pending after many newer connections arrived is the likeliest to
/// be idle). Each connection's stream handle is kept to close it at
/// shutdown or eviction.
#[derive(Default)]
pub(crate) struct Tracker {
    state: Mutex<Connections>,
    drained: Condvar,
}

#[derive(Default)]
struct Connections {
    next_id: u64,
    /// Threads serving a connection (evicted ones included, until they end).
    live: usize,
    established: usize,
    /// id -> evictable. A connection serving its AUTH failure delay is not
    /// evictable: closing it would let a guesser skip the delay.
    pending: std::collections::BTreeMap<u64, bool>,
    streams: HashMap<u64, Stream>,
}

impl Tracker {
    pub(crate) fn count(&self) -> usize {
        self.state.lock().live
    }

    /// Registers a new connection as pending, unless the established class
    /// is full (`MaxConn`) or every pending slot is held by an unevictable
    /// connection (`MaxUnauthenticated`).
    fn admit(&self, stream: &Stream, config: &Config) -> Result<u64> {
        let mut state = self.state.lock();
        if state.established >= config.max_connections {
            return Err(Error::MaxConn(config.max_connections));
        }
        if state.pending.len() >= config.max_unauthenticated {
            let Some(oldest) = state.pending.iter().find(|(_, &evictable)| evictable).map(|(&id, _)| id) else {
                return Err(Error::MaxUnauthenticated(config.max_unauthenticated));
            };
            state.pending.remove(&oldest);
            // Its thread sees the end of input and leaves on its own.
            if let Some(stream) = state.streams.get(&oldest) {
                stream.shutdown(Shutdown::Both);
            }
        }
        state.next_id += 1;
        let id = state.next_id;
        state.live += 1;
        state.pending.insert(id, true);
        if let Ok(handle) = stream.try_clone() {
            state.streams.insert(id, handle);
        }
        Ok(id)
    }

    /// Moves a pending connection to the established class. Fails when that
    /// class is full, or when the connection was evicted meanwhile.
    pub(crate) fn establish(&self, id: u64, max: usize) -> Result<()> {
        let mut state = self.state.lock();
        if !state.pending.contains_key(&id) {
            return Err(Error::MaxUnauthenticated(state.pending.len()));
        }
        if state.established >= max {
            return Err(Error::MaxConn(max));
        }
        state.pending.remove(&id);
        state.established += 1;
        Ok(())
    }

    /// Keeps a pending connection from being evicted (it closes itself).
    pub(crate) fn pin(&self, id: u64) {
        if let Some(evictable) = self.state.lock().pending.get_mut(&id) {
            *evictable = false;
        }
    }

    fn leave(&self, id: u64, established: bool) {
        let mut state = self.state.lock();
        state.live -= 1;
        if established {
            state.established -= 1;
        } else {
            state.pending.remove(&id);
        }
        state.streams.remove(&id);
        if state.live == 0 {
            self.drained.notify_all();
        }
    }

    fn shutdown_all(&self, how: Shutdown) {
        for stream in self.state.lock().streams.values() {
            stream.shutdown(how);
        }
    }

    /// Waits until no connection is left; false on timeout.
    fn wait_drained(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.state.lock();
        while state.live > 0 {
            if self.drained.wait_until(&mut state, deadline).timed_out() {
                return state.live == 0;
            }
        }
        true
    }
}

pub(crate) struct Shared {
    pub(crate) engine: Mutex<Engine>,
    pub(crate) storage: Option<Storage>,
    pub(crate) config: Config,
    pub(crate) notifier: Notifier,
    pub(crate) tracker: Tracker,
    pub(crate) started: Instant,
    /// The engine's time: lease deadlines, due times, retention.
    pub(crate) clock: Clock,
    /// Worker nodes' announcements (`NODE`/`NODES`): not job state, so not
    /// under the engine lock and never logged.
    pub(crate) presence: Mutex<Presence>,
    /// Compactions finished since start, and whether one is running (STATS).
    compactions: AtomicU64,
    compacting: AtomicBool,
    /// Called at each step of a compaction (tests park a compaction there).
    #[cfg(test)]
    compaction_hook: Mutex<Option<CompactionHook>>,
}

#[cfg(test)]
pub(crate) type CompactionHook = Arc<dyn Fn(CompactionStep) + Send + Sync>;

impl Shared {
    pub(crate) fn compaction_stats(&self) -> CompactionStats {
        CompactionStats {
            total: self.compactions.load(Ordering::Acquire),
            running: self.compacting.load(Ordering::Acquire),
        }
    }

    fn compaction_step(&self, _step: CompactionStep) {
        #[cfg(test)]
        if let Some(hook) = self.compaction_hook.lock().clone() {
            hook(_step);
        }
    }
}

pub struct Server {
    shared: Arc<Shared>,
}

impl Server {
    /// A server over `engine` with no storage (memory durability).
    pub fn new(config: Config, engine: Engine) -> Server {
        Server::with_storage(config, engine, None)
    }

    /// A server over a recovered engine and its storage.
    pub fn with_storage(config: Config, mut engine: Engine, storage: Option<Storage>) -> Server {
        engine.track_readied();
        let shared = Shared {
            // Anchored to the wall clock once per start (crate::clock).
            clock: Clock::new(),
            engine: Mutex::new(engine),
            storage,
            config,
            notifier: Notifier::default(),
            presence: Mutex::new(Presence::new()),
            tracker: Tracker::default(),
            started: Instant::now(),
            compactions: AtomicU64::new(0),
            compacting: AtomicBool::new(false),
            #[cfg(test)]
            compaction_hook: Mutex::new(None),
        };
        Server { shared: Arc::new(shared) }
    }

    /// Calls `hook` at each step of every compaction (tests).
    #[cfg(test)]
    pub(crate) fn set_compaction_hook(&self, hook: CompactionHook) {
        *self.shared.compaction_hook.lock() = Some(hook);
    }

    /// Builds the engine from `config`, recovering it from `data_dir` in the
    /// durable modes, and logs the recovery.
    ///
    /// Fences never repeat across restarts: the counter starts above every
    /// fence recovered and above `now_ms * 1024`. The clock term is what
    /// covers fences that were handed out but never logged (balanced mode's
    /// unsynced window, or memory mode): a run hands out fewer than 1024
    /// fences per millisecond, so every fence of an earlier run is below
    /// the clock floor of any later start. A fixed offset over the recovered
    /// fence would not do: two restarts recovering the same log would start
    /// from the same floor and hand out the same fences again. (A wall clock
    /// stepped backwards defeats this; keep the host's clock monotonic.)
    pub fn open(config: Config) -> Result<Server> {
        let mut engine = Engine::new(config.engine());
        // Wall time: the floor must exceed every earlier run's fences.
        let clock_floor = crate::now_ms().saturating_mul(1024);
        let storage = match (config.durability, &config.data_dir) {
            (Durability::Memory, _) => None,
            (durability, Some(dir)) => {
                let started = Instant::now();
                let (storage, report) = Storage::open(dir, durability, config.compact_threshold_bytes, &mut engine)?;
                let requeued = engine.finish_recovery();
                // The requeues are journaled: write them before serving, so
                // a second restart replays them (engine::finish_recovery).
                let mut events = Vec::new();
                engine.take_events(&mut events);
                storage.append(&events);
                storage.sync_all()?;
                engine.raise_fence_floor(report.next_fence.saturating_add(1));
                let truncated = match report.truncated {
                    Some((bytes, at)) => format!(
                        "{bytes} bytes at offset {at} (torn tail: {})",
                        report.torn.as_deref().unwrap_or("unknown")
                    ),
                    None => "none".into(),
                };
                crate::log(format_args!(
                    "recovery data_dir={} snapshot_jobs={} log_records={} logs={} reservations_requeued={} \
                     truncated={} jobs={} took_ms={}",
                    dir.display(),
                    report.snapshot_jobs,
                    report.log_records,
                    report.logs_replayed,
                    requeued,
                    truncated,
                    engine.job_count(),
                    started.elapsed().as_millis()
                ));
                Some(storage)
            }
            (_, None) => return Err(Error::Config("durable modes require data_dir".into())),
        };
        engine.raise_fence_floor(clock_floor);
        Ok(Server::with_storage(config, engine, storage))
    }

    /// Serves until `shutdown` is triggered, then shuts down gracefully.
    pub fn run(self, listeners: Vec<Listener>, shutdown: ShutdownHandle) -> Result<()> {
        let shared = self.shared;
        let listeners: Vec<Arc<Listener>> = listeners.into_iter().map(Arc::new).collect();
        let names: Vec<String> = listeners.iter().map(|l| l.describe()).collect();
        {
            let engine = shared.engine.lock();
            crate::log(format_args!(
                "start version={} listen=[{}] durability={} data_dir={} jobs_recovered={} max_connections={} \
                 max_unauthenticated={} auth={}",
                env!("CARGO_PKG_VERSION"),
                names.join(","),
                shared.config.durability.name(),
                shared.config.data_dir.as_ref().map_or("-".into(), |d| d.display().to_string()),
                engine.job_count(),
                shared.config.max_connections,
                shared.config.max_unauthenticated,
                match (&shared.config.password, shared.config.insecure) {
                    (Some(_), _) => "password",
                    (None, true) => "none-insecure",
                    (None, false) => "none",
                }
            ));
        }

        let housekeeper = {
            let (shared, shutdown) = (shared.clone(), shutdown.clone());
            thread::Builder::new().name("housekeeping".into()).spawn(move || housekeeping(&shared, &shutdown))?
        };
        let mut acceptors = Vec::new();
        for listener in &listeners {
            let (shared, shutdown, listener) = (shared.clone(), shutdown.clone(), listener.clone());
            acceptors.push(
                thread::Builder::new()
                    .name("accept".into())
                    .spawn(move || accept_loop(&shared, &listener, &shutdown))?,
            );
        }

        shutdown.wait();
        // 1. Stop accepting.
        for listener in &listeners {
            listener.wake();
        }
        for handle in acceptors {
            let _ = handle.join();
        }
        // 2. Blocked FETCHes return empty; idle readers see end of input;
        //    requests already received are still answered.
        shared.notifier.shutdown();
        shared.tracker.shutdown_all(Shutdown::Read);
        if !shared.tracker.wait_drained(DRAIN_TIMEOUT) {
            shared.tracker.shutdown_all(Shutdown::Both);
            shared.tracker.wait_drained(Duration::from_secs(1));
        }
        let _ = housekeeper.join();
        // 3. Everything confirmed or not, make it durable.
        let mut result = Ok(());
        if let Some(storage) = &shared.storage {
            result = storage.sync_all();
        }
        for listener in &listeners {
            listener.remove_socket_file();
        }
        let engine = shared.engine.lock();
        crate::log(format_args!(
            "shutdown jobs={} log_synced={} uptime_s={}",
            engine.job_count(),
            match (&result, &shared.storage) {
                (_, None) => "n/a".to_string(),
                (Ok(()), Some(_)) => "yes".to_string(),
                (Err(e), Some(_)) => format!("no ({e})"),
            },
            shared.started.elapsed().as_secs()
        ));
        drop(engine);
        // A connection thread still holds the shared state for a moment
        // after leaving the tracker. Wait for those handles, so the storage
        // (and the data_dir LOCK) is released once `run` returns and a new
        // server can open the directory at once.
        let deadline = Instant::now() + Duration::from_secs(1);
        while Arc::strong_count(&shared) > 1 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        result
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &Listener, shutdown: &ShutdownHandle) {
    loop {
        let accepted = listener.accept();
        if shutdown.is_triggered() {
            return;
        }
        let mut stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                crate::log(format_args!("accept failed on {}: {e}", listener.describe()));
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let id = match shared.tracker.admit(&stream, &shared.config) {
            Ok(id) => id,
            Err(e) => {
                // Non-blocking, so a client that does not read cannot stall
                // the accept loop; the reply is a few dozen bytes.
                stream.set_nonblocking();
                let mut reply = Vec::new();
                Reply::Error(e).encode(&mut reply);
                let _ = std::io::Write::write_all(&mut stream, &reply);
                continue;
            }
        };
        let conn_shared = shared.clone();
        let spawned = thread::Builder::new().name("conn".into()).spawn(move || {
            let shared = conn_shared;
            let mut established = false;
            if catch_unwind(AssertUnwindSafe(|| conn::serve(&shared, stream, id, &mut established))).is_err() {
                crate::log(format_args!("connection {id} panicked; closed it, the server goes on"));
            }
            shared.tracker.leave(id, established);
        });
        if let Err(e) = spawned {
            crate::log(format_args!("cannot start a connection thread: {e}"));
            shared.tracker.leave(id, false);
        }
    }
}

/// Ticks the engine, fsyncs the log in balanced mode, and starts
/// compaction. Compaction runs on a thread of its own: writing a large
/// snapshot takes hundreds of milliseconds, during which balanced mode's
/// 10 ms fsync must go on, or a machine crash could lose far more than the
/// promised interval.
fn housekeeping(shared: &Arc<Shared>, shutdown: &ShutdownHandle) {
    let mut compaction: Option<thread::JoinHandle<()>> = None;
    let mut events = Vec::new();
    let mut readied = Vec::new();
    while !shutdown.wait_timeout(HOUSEKEEPING_INTERVAL) {
        {
            let mut engine = shared.engine.lock();
            engine.tick(shared.clock.now_ms());
            // Promotions and expiries are journaled (they decide queue
            // order after a restart); queued under the lock, like a
            // command's records. Nothing waits on them: a later command's
            // records come after them in the log.
            if let Some(storage) = &shared.storage {
                engine.take_events(&mut events);
                storage.append(&events);
                events.clear();
            }
            engine.take_readied(&mut readied);
        }
        if !readied.is_empty() {
            shared.notifier.notify(&readied);
            readied.clear();
        }
        let Some(storage) = &shared.storage else { continue };
        if storage.durability() == Durability::Balanced {
            if let Err(e) = storage.sync_all() {
                crate::log(format_args!("periodic fsync failed: {e}"));
            }
        }
        let idle = compaction.as_ref().is_none_or(|h| h.is_finished());
        if idle && storage.needs_compaction(shared.engine.lock().live_bytes()) {
            if let Some(done) = compaction.take() {
                let _ = done.join();
            }
            let shared = shared.clone();
            compaction = thread::Builder::new()
                .name("compaction".into())
                .spawn(move || {
                    let storage = shared.storage.as_ref().expect("compaction needs storage");
                    lower_priority();
                    shared.compacting.store(true, Ordering::Release);
                    match compact(&shared, storage) {
                        Ok(()) => {
                            shared.compactions.fetch_add(1, Ordering::AcqRel);
                        }
                        Err(e) => crate::log(format_args!("compaction failed, will retry: {e}")),
                    }
                    shared.compacting.store(false, Ordering::Release);
                })
                .map_err(|e| crate::log(format_args!("cannot start compaction: {e}")))
                .ok();
        }
    }
    // Shutdown makes the log durable after this returns: let a running
    // compaction finish switching generations first.
    if let Some(handle) = compaction {
        let _ = handle.join();
    }
}

/// The compaction thread yields the CPU to the connection threads: it
/// replays the whole log (seconds of CPU at half a million jobs) and on a
/// host with few cores would otherwise delay requests by whole scheduler
/// time slices. Nice 10 on this thread only (Linux nice values are per
/// thread); its one short engine-lock section is unaffected in practice
/// (the lock is a parking_lot mutex, no priority inversion beyond it).
/// Failure is harmless: it then runs at normal priority.
fn lower_priority() {
    // SAFETY: plain syscalls on the calling thread's id; no memory is shared.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10);
    }
}

/// Snapshot the live jobs and start a new log generation. The engine lock
/// is held only to switch generations (constant work: issue 18 measured
/// 0.4 s stalls at 524,288 jobs when the job list was copied under it);
/// the snapshot's image is rebuilt from the files and written without it.
fn compact(shared: &Shared, storage: &Storage) -> Result<()> {
    let started = Instant::now();
    let prepared = storage.prepare_compaction()?;
    let locked = Instant::now();
    let compaction = {
        let mut engine = shared.engine.lock();
        storage.start_compaction(prepared, &mut engine, shared.clock.now_ms())?
    };
    let lock_us = locked.elapsed().as_micros();
    let report = storage.finish_compaction(&compaction, &mut |step| shared.compaction_step(step))?;
    crate::log(format_args!(
        "compaction jobs={} snapshot_bytes={} log_bytes_before={} new_log_gen={} took_ms={} rebuild_ms={} \
         engine_lock_us={}",
        report.jobs,
        report.snapshot_bytes,
        report.log_bytes_before,
        report.new_gen,
        started.elapsed().as_millis(),
        report.rebuild_ms,
        lock_us
    ));
    Ok(())
}
