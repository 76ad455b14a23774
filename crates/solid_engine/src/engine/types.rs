//! Values that cross the engine boundary: ids (defined in [`crate::id`],
//! re-exported here), states, reservations, the events the engine journals
//! for the storage layer, and job images for snapshots.

use std::sync::Arc;

pub use crate::id::JobId;

/// Job payloads are opaque and shared: a reservation, a journal event and
/// the job itself point at the same bytes instead of copying them.
pub type Payload = Arc<[u8]>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Scheduled,
    Ready,
    Reserved,
    Completed,
    Dead,
    Cancelled,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Scheduled => "scheduled",
            State::Ready => "ready",
            State::Reserved => "reserved",
            State::Completed => "completed",
            State::Dead => "dead",
            State::Cancelled => "cancelled",
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> Option<State> {
        [State::Scheduled, State::Ready, State::Reserved, State::Completed, State::Dead, State::Cancelled]
            .get(code as usize)
            .copied()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub id: JobId,
    pub channel: u32,
    pub fence: u64,
    pub attempts: u32,
    pub payload: Payload,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo {
    pub id: JobId,
    pub channel: u32,
    pub state: State,
    pub attempts: u32,
    pub payload: Payload,
    /// The due time while the job is scheduled.
    pub due_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadJob {
    pub id: JobId,
    pub channel: u32,
    pub attempts: u32,
    pub reason: Payload,
    pub payload: Payload,
}

/// A channel's jobs in each live state, as `CHANNELS` reports them.
/// Completed and cancelled jobs are not counted per channel: they keep only
/// their id, for GET and deduplication.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelCounts {
    pub ready: u64,
    pub scheduled: u64,
    pub reserved: u64,
    pub dead: u64,
}

impl ChannelCounts {
    pub fn is_empty(&self) -> bool {
        *self == ChannelCounts::default()
    }

    /// The gauge of `state`, or None for a state not counted per channel.
    pub(crate) fn gauge(&mut self, state: State) -> Option<&mut u64> {
        match state {
            State::Ready => Some(&mut self.ready),
            State::Scheduled => Some(&mut self.scheduled),
            State::Reserved => Some(&mut self.reserved),
            State::Dead => Some(&mut self.dead),
            State::Completed | State::Cancelled => None,
        }
    }
}

/// One channel in a `CHANNELS` reply: its counts and the job at the head
/// of its ready queue (the next FETCH takes it), whose payload a reader
/// can GET to judge how long it has waited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelInfo {
    pub channel: u32,
    pub counts: ChannelCounts,
    pub oldest_ready: Option<JobId>,
}

/// Counters and gauges reported by STATS.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub ready: u64,
    pub scheduled: u64,
    pub reserved: u64,
    pub completed: u64,
    pub dead: u64,
    pub cancelled: u64,
    pub pushed_total: u64,
    pub acked_total: u64,
    pub retried_total: u64,
    pub failed_total: u64,
    pub cancelled_total: u64,
    pub expired_leases_total: u64,
    pub released_total: u64,
}

/// A state change that must be made durable. The engine journals one per
/// change; replaying them in order with [`super::Engine::apply`] rebuilds
/// the same jobs in the same queue order (reservations excepted, see
/// `finish_recovery`).
///
/// Order guarantee: every insertion into a ready queue is journaled, in the
/// order it happened: at the back `Pushed` (ready) and `Promoted`, at the
/// head `Released` and `Expired`. Replay therefore performs the same queue
/// operations in the same order and needs no clock. (Promotion and expiry
/// are derived changes that used to be re-derived after replay: a RETRYed
/// or `PUSH AT` job then went behind every later push.) Retention pruning
/// is still derived: it decides nothing about order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A job was created; `due_ms == 0` means ready at once.
    Pushed {
        id: JobId,
        channel: u32,
        due_ms: u64,
        payload: Payload,
    },
    /// A reservation with this fence was handed out (attempts + 1).
    Reserved {
        id: JobId,
        fence: u64,
    },
    Acked {
        id: JobId,
        at_ms: u64,
    },
    Retried {
        id: JobId,
        due_ms: u64,
    },
    Failed {
        id: JobId,
        at_ms: u64,
        reason: Payload,
    },
    Cancelled {
        id: JobId,
        at_ms: u64,
    },
    /// A reservation was handed back unused (RELEASE): the job is ready at
    /// the head of its channel, attempts - 1 (never below 0).
    Released {
        id: JobId,
    },
    /// A scheduled job fell due and went to the back of its channel.
    Promoted {
        id: JobId,
    },
    /// A lease ran out: the job is ready at the head of its channel,
    /// attempts kept.
    Expired {
        id: JobId,
    },
}

/// The full state of one job, as written to a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobImage {
    pub id: JobId,
    pub channel: u32,
    pub state: State,
    pub attempts: u32,
    /// Due time (scheduled), finish time (completed, dead, cancelled), the
    /// fence (reserved: restart requeues the oldest reservation first); 0
    /// for ready jobs.
    pub time_ms: u64,
    pub reason: Payload,
    pub payload: Payload,
}
