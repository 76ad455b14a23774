//! Rebuilding an engine: replaying journaled events, importing snapshot
//! images, and exporting them.

use super::*;

impl Engine {
    /// Replays one journaled event. Events are facts, so they are applied
    /// unconditionally: a `Pushed` replaces any job with the same id (the
    /// original must have been forgotten before it was pushed again), and
    /// state changes do not re-check fences. Counters are not touched:
    /// totals count from this start. Nothing is journaled.
    pub fn apply(&mut self, event: Event) {
        match event {
            Event::Pushed { id, channel, due_ms, payload } => {
                self.forget(id);
                self.insert(id, channel, payload);
                if due_ms > 0 {
                    self.make_scheduled(id, due_ms);
                } else {
                    self.make_ready(id);
                }
            }
            Event::Reserved { id, fence } => {
                self.next_fence = self.next_fence.max(fence + 1);
                if let Some(job) = self.jobs.get_mut(&id) {
                    set_state(&mut self.stats, &mut self.channels, job, State::Reserved);
                    job.attempts += 1;
                    job.fence = fence;
                }
            }
            Event::Acked { id, at_ms } if self.jobs.contains_key(&id) => {
                self.make_finished(id, State::Completed, at_ms);
            }
            Event::Retried { id, due_ms } if self.jobs.contains_key(&id) => {
                self.make_scheduled(id, due_ms);
            }
            Event::Failed { id, at_ms, reason } if self.jobs.contains_key(&id) => {
                self.make_dead(id, at_ms, reason);
            }
            Event::Cancelled { id, at_ms } if self.jobs.contains_key(&id) => {
                self.make_finished(id, State::Cancelled, at_ms);
            }
            Event::Promoted { id } if self.jobs.get(&id).is_some_and(|j| j.state == State::Scheduled) => {
                self.make_ready(id);
            }
            // No fence check: the event says the reservation current at that
            // point of the log expired (and snapshots before this format
            // did not keep reserved jobs' fences).
            Event::Expired { id } => {
                if let Some(job) = self.jobs.get_mut(&id).filter(|j| j.state == State::Reserved) {
                    set_state(&mut self.stats, &mut self.channels, job, State::Ready);
                    self.requeue_front(id);
                }
            }
            Event::Released { id } => {
                if let Some(job) = self.jobs.get_mut(&id) {
                    set_state(&mut self.stats, &mut self.channels, job, State::Ready);
                    job.attempts = job.attempts.saturating_sub(1);
                    self.requeue_front(id);
                }
            }
            _ => {}
        }
    }

    /// Restores one job from a snapshot. Images must come in the order
    /// [`Engine::export`] produced them (queue and retention order).
    pub fn import(&mut self, image: JobImage) {
        let JobImage { id, channel, state, attempts, time_ms, reason, payload } = image;
        self.forget(id);
        self.insert(id, channel, payload);
        self.jobs.get_mut(&id).expect("inserted").attempts = attempts;
        match state {
            State::Ready => self.make_ready(id),
            State::Scheduled => self.make_scheduled(id, time_ms),
            State::Reserved => {
                let job = self.jobs.get_mut(&id).expect("inserted");
                set_state(&mut self.stats, &mut self.channels, job, State::Reserved);
                job.fence = time_ms;
            }
            State::Completed | State::Cancelled => self.make_finished(id, state, time_ms),
            State::Dead => self.make_dead(id, time_ms, reason),
        }
    }

    /// Ends recovery: reservations do not survive a restart (nobody holds
    /// their lease any more), so every reserved job becomes ready at the head
    /// of its channel, attempts kept, oldest reservation first. Returns how
    /// many were requeued.
    ///
    /// Each requeue is journaled as an `Expired` event (when the journal is
    /// on): the caller must write them before serving, or a second restart
    /// would replay these jobs as still reserved and requeue them at the
    /// head again, ahead of jobs released or expired after this restart.
    pub fn finish_recovery(&mut self) -> usize {
        let mut reserved: Vec<(u64, JobId)> =
            self.jobs.iter().filter(|(_, j)| j.state == State::Reserved).map(|(id, j)| (j.fence, *id)).collect();
        reserved.sort_unstable();
        for &(_, id) in reserved.iter().rev() {
            let job = self.jobs.get_mut(&id).expect("job exists");
            set_state(&mut self.stats, &mut self.channels, job, State::Ready);
            self.requeue_front(id);
            self.record(|| Event::Expired { id });
        }
        reserved.len()
    }

    /// Every retained job, in an order that [`Engine::import`] turns back
    /// into the same queues: ready jobs channel by channel in queue order,
    /// then scheduled jobs in the order they become ready (due time, then
    /// scheduling order), then reserved jobs oldest reservation first, then
    /// finished and dead in list order.
    pub fn export(&self) -> Vec<JobImage> {
        let image = |id: JobId, job: &Job| JobImage {
            id,
            channel: job.channel,
            state: job.state,
            attempts: job.attempts,
            time_ms: match job.state {
                State::Ready => 0,
                State::Reserved => job.fence,
                _ => job.time_ms,
            },
            reason: job.reason.clone().unwrap_or_else(|| Payload::from(&b""[..])),
            payload: job.payload.clone(),
        };
        let mut out = Vec::with_capacity(self.jobs.len());
        let mut channels: Vec<_> = self.ready.keys().copied().collect();
        channels.sort_unstable();
        for channel in channels {
            for &(id, seq) in &self.ready[&channel] {
                if let Some(job) = self.jobs.get(&id) {
                    if job.state == State::Ready && job.seq == seq {
                        out.push(image(id, job));
                    }
                }
            }
        }
        let mut scheduled: Vec<(u64, u64, JobId)> = Vec::with_capacity(self.stats.scheduled as usize);
        let mut reserved: Vec<(u64, JobId)> = Vec::with_capacity(self.stats.reserved as usize);
        for (id, job) in &self.jobs {
            match job.state {
                State::Scheduled => scheduled.push((job.time_ms, job.seq, *id)),
                State::Reserved => reserved.push((job.fence, *id)),
                _ => {}
            }
        }
        scheduled.sort_unstable();
        reserved.sort_unstable();
        out.extend(scheduled.into_iter().map(|(_, _, id)| image(id, &self.jobs[&id])));
        out.extend(reserved.into_iter().map(|(_, id)| image(id, &self.jobs[&id])));
        for &(_, seq, id) in &self.finished {
            if let Some(job) = self.jobs.get(&id) {
                if job.seq == seq && matches!(job.state, State::Completed | State::Cancelled) {
                    out.push(image(id, job));
                }
            }
        }
        for &(seq, id) in &self.dead {
            if let Some(job) = self.jobs.get(&id) {
                if job.seq == seq && job.state == State::Dead {
                    out.push(image(id, job));
                }
            }
        }
        out
    }
}
