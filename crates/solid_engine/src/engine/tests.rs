use super::*;

fn id(n: u128) -> JobId {
    JobId(n)
}

fn p(s: &str) -> Payload {
    Payload::from(s.as_bytes())
}

fn engine() -> Engine {
    Engine::new(EngineConfig { lease_ms: 1_000, completed_retention_ms: 5_000, dead_max: 3 })
}

fn fetch(e: &mut Engine, now: u64, count: usize, channels: &[u32]) -> Vec<Reservation> {
    let mut out = Vec::new();
    e.fetch(now, count, 0, channels, &mut out);
    out
}

fn state(e: &mut Engine, now: u64, n: u128) -> Option<State> {
    e.get(now, id(n)).map(|j| j.state)
}

#[test]
fn push_fetch_ack_completes() {
    let mut e = engine();
    assert!(e.push(0, 1, id(1), p("a"), None));
    assert_eq!(state(&mut e, 0, 1), Some(State::Ready));
    let r = fetch(&mut e, 10, 10, &[1]);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].id, r[0].channel, r[0].attempts, &*r[0].payload), (id(1), 1, 1, &b"a"[..]));
    assert_eq!(state(&mut e, 10, 1), Some(State::Reserved));
    e.ack(20, id(1), r[0].fence).unwrap();
    assert_eq!(state(&mut e, 20, 1), Some(State::Completed));
    let s = e.stats();
    assert_eq!((s.completed, s.ready, s.reserved, s.pushed_total, s.acked_total), (1, 0, 0, 1, 1));
}

#[test]
fn duplicate_push_is_idempotent_in_every_retained_state() {
    let mut e = engine();
    assert!(e.push(0, 1, id(1), p("a"), None));
    assert!(!e.push(0, 2, id(1), p("other"), None));
    let r = fetch(&mut e, 0, 1, &[1]);
    assert!(!e.push(0, 1, id(1), p("b"), None), "reserved");
    e.ack(0, id(1), r[0].fence).unwrap();
    assert!(!e.push(1, 1, id(1), p("c"), None), "completed");
    let job = e.get(1, id(1)).unwrap();
    assert_eq!(
        (job.state, job.channel, &*job.payload),
        (State::Completed, 1, &b""[..]),
        "finished jobs drop their payload"
    );
    assert_eq!(e.stats().pushed_total, 1);
    assert_eq!(e.push_many(1, 1, 0, vec![(id(1), p("x")), (id(2), p("y")), (id(2), p("z"))]), 1);
}

#[test]
fn completed_jobs_are_forgotten_after_retention() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    let r = fetch(&mut e, 0, 1, &[1]);
    e.ack(100, id(1), r[0].fence).unwrap();
    assert!(e.get(5_099, id(1)).is_some());
    assert!(e.get(5_100, id(1)).is_none());
    assert_eq!(e.stats().completed, 0);
    // Once forgotten, the id can be used again.
    assert!(e.push(5_100, 1, id(1), p("again"), None));
}

#[test]
fn fencing_rejects_a_late_ack_after_expiry_and_refetch() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    let first = fetch(&mut e, 0, 1, &[1]).remove(0);
    // Lease is 1000 ms: at 1000 it has expired.
    let second = fetch(&mut e, 1_000, 1, &[1]).remove(0);
    assert_eq!(second.id, id(1));
    assert!(second.fence > first.fence);
    assert_eq!(second.attempts, 2);
    assert_eq!(e.stats().expired_leases_total, 1);
    let err = e.ack(1_001, id(1), first.fence).unwrap_err();
    assert!(matches!(err, Error::Stale { fence, .. } if fence == first.fence));
    assert_eq!(state(&mut e, 1_001, 1), Some(State::Reserved), "stale ack changed nothing");
    assert!(matches!(e.retry(1_001, id(1), first.fence, 0), Err(Error::Stale { .. })));
    assert!(matches!(e.fail(1_001, id(1), first.fence, p("x")), Err(Error::Stale { .. })));
    assert!(matches!(e.extend(1_001, id(1), first.fence, 10), Err(Error::Stale { .. })));
    e.ack(1_001, id(1), second.fence).unwrap();
    // Acking again with the same fence is stale: it is no longer reserved.
    assert!(matches!(e.ack(1_002, id(1), second.fence), Err(Error::Stale { .. })));
    assert!(matches!(e.ack(1_002, id(9), 1), Err(Error::NotFound(_))));
}

#[test]
fn ack_after_deadline_without_refetch_is_stale() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    let r = fetch(&mut e, 0, 1, &[1]).remove(0);
    assert!(matches!(e.ack(1_000, id(1), r.fence), Err(Error::Stale { .. })));
    assert_eq!(state(&mut e, 1_000, 1), Some(State::Ready));
}

#[test]
fn expired_lease_requeues_at_head_of_channel() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    let _ = fetch(&mut e, 0, 1, &[1]);
    e.push(10, 1, id(2), p("b"), None);
    e.push(10, 1, id(3), p("c"), None);
    let r = fetch(&mut e, 1_500, 3, &[1]);
    let ids: Vec<_> = r.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![id(1), id(2), id(3)]);
    assert_eq!(r[0].attempts, 2);
}

#[test]
fn extend_moves_the_deadline() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    let r = fetch(&mut e, 0, 1, &[1]).remove(0);
    e.extend(900, id(1), r.fence, 1_000).unwrap();
    assert!(fetch(&mut e, 1_500, 1, &[1]).is_empty(), "still leased");
    e.ack(1_899, id(1), r.fence).unwrap();
    assert_eq!(e.stats().expired_leases_total, 0);
}

#[test]
fn retry_schedules_with_delay_and_keeps_attempts() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    let r = fetch(&mut e, 0, 1, &[1]).remove(0);
    e.retry(100, id(1), r.fence, 500).unwrap();
    let job = e.get(100, id(1)).unwrap();
    assert_eq!((job.state, job.due_ms, job.attempts), (State::Scheduled, Some(600), 1));
    assert_eq!(e.next_deadline(), Some(600));
    assert!(fetch(&mut e, 599, 1, &[1]).is_empty());
    let again = fetch(&mut e, 600, 1, &[1]).remove(0);
    assert_eq!(again.attempts, 2);
    e.retry(600, id(1), again.fence, 0).unwrap();
    assert_eq!(state(&mut e, 600, 1), Some(State::Ready), "zero delay is ready at once");
    assert_eq!(e.stats().retried_total, 2);
}

#[test]
fn push_at_future_is_scheduled_and_past_is_ready() {
    let mut e = engine();
    e.push(1_000, 1, id(1), p("a"), Some(2_000));
    e.push(1_000, 1, id(2), p("b"), Some(500));
    assert_eq!(state(&mut e, 1_000, 1), Some(State::Scheduled));
    assert_eq!(state(&mut e, 1_000, 2), Some(State::Ready));
    assert_eq!(e.push_many(1_000, 1, 3_000, vec![(id(3), p("c"))]), 1);
    assert_eq!(e.get(1_000, id(3)).unwrap().due_ms, Some(3_000));
    let tick = e.tick(2_000);
    assert_eq!(tick.promoted, 1);
    assert!(tick.made_ready());
    assert_eq!(state(&mut e, 2_000, 1), Some(State::Ready));
    assert_eq!(e.get(2_000, id(1)).unwrap().due_ms, None);
}

#[test]
fn fail_makes_dead_and_dead_list_keeps_the_newest() {
    let mut e = engine();
    for n in 1..=5 {
        e.push(0, 1, id(n), p(&format!("j{n}")), None);
    }
    for r in fetch(&mut e, 0, 5, &[1]) {
        e.fail(r.id.0 as u64, r.id, r.fence, p(&format!("boom{}", r.id.0))).unwrap();
    }
    let dead = e.dead(10);
    let ids: Vec<_> = dead.iter().map(|d| d.id).collect();
    assert_eq!(ids, vec![id(5), id(4), id(3)], "newest first, dead_max = 3");
    assert_eq!(&*dead[0].reason, b"boom5");
    assert_eq!(dead[0].attempts, 1);
    assert_eq!(e.dead(1).len(), 1);
    assert!(e.get(0, id(1)).is_none(), "oldest dead job forgotten");
    let s = e.stats();
    assert_eq!((s.dead, s.failed_total), (3, 5));
}

#[test]
fn cancel_in_each_state() {
    let mut e = engine();
    e.push(0, 1, id(1), p("ready"), None);
    e.push(0, 1, id(2), p("scheduled"), Some(10_000));
    e.push(0, 2, id(3), p("reserved"), None);
    e.push(0, 2, id(4), p("completed"), None);
    e.push(0, 2, id(5), p("dead"), None);
    let rs = fetch(&mut e, 0, 3, &[2]);
    e.ack(0, id(4), rs[1].fence).unwrap();
    e.fail(0, id(5), rs[2].fence, p("x")).unwrap();

    assert!(e.cancel(1, id(1)).unwrap());
    assert!(e.cancel(1, id(2)).unwrap());
    assert!(matches!(e.cancel(1, id(3)), Err(Error::Busy(_))));
    assert!(!e.cancel(1, id(4)).unwrap());
    assert!(!e.cancel(1, id(5)).unwrap());
    assert!(!e.cancel(1, id(1)).unwrap(), "already cancelled");
    assert!(!e.cancel(1, id(99)).unwrap(), "unknown");
    assert_eq!(state(&mut e, 1, 1), Some(State::Cancelled));
    assert_eq!(state(&mut e, 1, 2), Some(State::Cancelled));
    // Cancelled jobs are never delivered, not even after their due time.
    assert!(fetch(&mut e, 20_000, 10, &[1]).is_empty());
    assert_eq!(e.stats().cancelled_total, 2);
    // Retained like completed jobs, then forgotten.
    assert!(e.get(20_000, id(1)).is_none());
}

#[test]
fn channels_are_visited_in_the_given_order_up_to_count() {
    let mut e = engine();
    for n in 1..=3 {
        e.push(0, 1, id(n), p("c1"), None);
        e.push(0, 2, id(10 + n), p("c2"), None);
    }
    let r = fetch(&mut e, 0, 4, &[2, 1]);
    let got: Vec<_> = r.iter().map(|r| (r.channel, r.id)).collect();
    assert_eq!(got, vec![(2, id(11)), (2, id(12)), (2, id(13)), (1, id(1))]);
    assert!(fetch(&mut e, 0, 10, &[7]).is_empty(), "unknown channel");
    let fences: Vec<_> = r.iter().map(|r| r.fence).collect();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "fresh monotonic fences");
}

#[test]
fn attempts_count_every_reservation() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    let mut now = 0;
    for expected in 1..=4 {
        let r = fetch(&mut e, now, 1, &[1]).remove(0);
        assert_eq!(r.attempts, expected);
        now += 1_000; // let the lease expire
    }
    assert_eq!(e.stats().expired_leases_total, 3);
}

#[test]
fn ack_many_reports_each_pair() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    e.push(0, 1, id(2), p("b"), None);
    let r = fetch(&mut e, 0, 2, &[1]);
    let res = e.ack_many(1, &[(id(1), r[0].fence), (id(2), r[0].fence), (id(3), 1), (id(2), r[1].fence)]);
    assert_eq!(res, vec![ACKED, NOT_ACKED, NOT_ACKED, ACKED]);
}

#[test]
fn ack_many_resent_after_it_applied_says_already_acked() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    e.push(0, 1, id(2), p("b"), None);
    let r = fetch(&mut e, 0, 2, &[1]);
    let pairs = [(id(1), r[0].fence), (id(2), r[1].fence)];
    assert_eq!(e.ack_many(1, &pairs), vec![ACKED, ACKED]);
    let acked = e.stats().acked_total;
    // The same batch again (its reply was lost): applied already, nothing changes.
    assert_eq!(e.ack_many(2, &pairs), vec![ALREADY_ACKED, ALREADY_ACKED]);
    assert_eq!(e.stats().acked_total, acked);
    // Another fence of a completed job is stale; a single ACK stays strict.
    assert_eq!(e.ack_many(3, &[(id(1), r[0].fence + 100)]), vec![NOT_ACKED]);
    assert!(matches!(e.ack(4, id(1), r[0].fence), Err(Error::Stale { .. })));
}

#[test]
fn journal_replays_to_the_same_state() {
    let mut e = engine();
    e.set_journal(true);
    e.push(0, 1, id(1), p("a"), None);
    e.push(0, 1, id(2), p("b"), Some(50_000));
    e.push(0, 3, id(3), p("c"), None);
    e.push(0, 3, id(4), p("d"), None);
    let r = fetch(&mut e, 0, 3, &[1, 3]);
    e.ack(5, id(1), r[0].fence).unwrap();
    e.fail(5, id(3), r[1].fence, p("bad")).unwrap();
    e.cancel(5, id(2)).unwrap();
    e.extend(5, id(4), r[2].fence, 100).unwrap();
    let mut events = Vec::new();
    e.take_events(&mut events);
    assert_eq!(events.len(), 4 + 3 + 3, "extend is not journaled");

    let mut replayed = engine();
    for ev in events {
        replayed.apply(ev);
    }
    assert_eq!(replayed.next_fence(), e.next_fence());
    assert_eq!(replayed.finish_recovery(), 1);
    assert_eq!(replayed.get(5, id(1)).unwrap().state, State::Completed);
    assert_eq!(replayed.get(5, id(2)).unwrap().state, State::Cancelled);
    assert_eq!(replayed.dead(10)[0].id, id(3));
    let j4 = replayed.get(5, id(4)).unwrap();
    assert_eq!((j4.state, j4.attempts), (State::Ready, 1), "reservation recovered as ready");
    let s = replayed.stats();
    assert_eq!((s.ready, s.completed, s.dead, s.cancelled, s.reserved), (1, 1, 1, 1, 0));
}

#[test]
fn export_import_round_trip_keeps_queue_order() {
    let mut e = engine();
    for n in 1..=4 {
        e.push(0, 1, id(n), p("x"), None);
    }
    e.push(0, 2, id(5), p("s"), Some(9_000));
    let r = fetch(&mut e, 0, 2, &[1]);
    e.ack(0, id(1), r[0].fence).unwrap();
    let images = e.export();
    assert_eq!(images.len(), e.job_count());
    let mut copy = engine();
    for image in images {
        copy.import(image);
    }
    copy.raise_fence_floor(e.next_fence());
    copy.finish_recovery();
    let got: Vec<_> = fetch(&mut copy, 1, 10, &[1]).iter().map(|r| (r.id, r.attempts)).collect();
    // id 2 was reserved: recovered at the head with its attempt kept.
    assert_eq!(got, vec![(id(2), 2), (id(3), 1), (id(4), 1)]);
    assert_eq!(copy.get(1, id(1)).unwrap().state, State::Completed);
    assert_eq!(copy.get(1, id(5)).unwrap().due_ms, Some(9_000));
}

#[test]
fn stale_heap_entries_are_collected() {
    let mut e = engine();
    for n in 0..5_000u128 {
        e.push(0, 1, id(n), p("x"), None);
        e.push(0, 2, id(100_000 + n), p("s"), Some(1_000_000));
    }
    for r in fetch(&mut e, 0, 5_000, &[1]) {
        e.ack(1, r.id, r.fence).unwrap();
    }
    for n in 0..5_000u128 {
        e.cancel(1, id(100_000 + n)).unwrap();
    }
    e.tick(2);
    let (leases, scheduled) = e.heap_entries();
    assert!(leases <= 1024 && scheduled <= 1024, "{leases} lease / {scheduled} schedule entries left");
}

#[test]
fn release_requeues_at_the_head_and_takes_back_the_attempt() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    e.push(0, 1, id(2), p("b"), None);
    let r = fetch(&mut e, 0, 1, &[1]).remove(0);
    assert_eq!((r.id, r.attempts), (id(1), 1));
    e.push(1, 1, id(3), p("c"), None);
    e.release(2, id(1), r.fence).unwrap();
    let job = e.get(2, id(1)).unwrap();
    assert_eq!((job.state, job.attempts, job.due_ms), (State::Ready, 0, None));
    let s = e.stats();
    assert_eq!((s.ready, s.reserved, s.released_total, s.retried_total), (3, 0, 1, 0));
    assert_eq!(s.expired_leases_total, 0);
    // Head of its channel, ahead of jobs pushed before and after it.
    let got: Vec<_> = fetch(&mut e, 3, 3, &[1]).iter().map(|r| (r.id, r.attempts)).collect();
    assert_eq!(got, vec![(id(1), 1), (id(2), 1), (id(3), 1)]);
}

#[test]
fn release_after_a_used_attempt_keeps_the_used_one() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    let first = fetch(&mut e, 0, 1, &[1]).remove(0);
    e.retry(1, id(1), first.fence, 0).unwrap();
    let second = fetch(&mut e, 2, 1, &[1]).remove(0);
    assert_eq!(second.attempts, 2);
    e.release(3, id(1), second.fence).unwrap();
    assert_eq!(e.get(3, id(1)).unwrap().attempts, 1);
    let third = fetch(&mut e, 4, 1, &[1]).remove(0);
    assert_eq!(third.attempts, 2, "the released reservation is not counted");
}

#[test]
fn release_is_fenced_like_ack() {
    let mut e = engine();
    e.push(0, 1, id(1), p("a"), None);
    let r = fetch(&mut e, 0, 1, &[1]).remove(0);
    assert!(matches!(e.release(1, id(1), r.fence + 1), Err(Error::Stale { .. })));
    assert!(matches!(e.release(1, id(9), r.fence), Err(Error::NotFound(_))));
    assert_eq!(state(&mut e, 1, 1), Some(State::Reserved), "a stale release changed nothing");
    e.release(1, id(1), r.fence).unwrap();
    // The fence is dead once released: no second release, no ack, no retry.
    assert!(matches!(e.release(2, id(1), r.fence), Err(Error::Stale { .. })));
    assert!(matches!(e.ack(2, id(1), r.fence), Err(Error::Stale { .. })));
    assert!(matches!(e.retry(2, id(1), r.fence, 0), Err(Error::Stale { .. })));
    assert!(matches!(e.extend(2, id(1), r.fence, 0), Err(Error::Stale { .. })));
    assert_eq!(e.stats().released_total, 1);
    // The old lease entry does not expire the job again later.
    assert_eq!(e.tick(5_000).expired, 0);
    assert_eq!(state(&mut e, 5_000, 1), Some(State::Ready));
    // An expired lease can no longer be released: it is ready already.
    let again = fetch(&mut e, 5_000, 1, &[1]).remove(0);
    assert!(matches!(e.release(6_000, id(1), again.fence), Err(Error::Stale { .. })));
    assert_eq!(e.get(6_000, id(1)).unwrap().attempts, 1, "expiry keeps the attempt");
}

#[test]
fn release_many_keeps_the_given_order_at_the_head() {
    let mut e = engine();
    for n in 1..=4 {
        e.push(0, 1, id(n), p("x"), None);
    }
    e.push(0, 2, id(10), p("y"), None);
    let r = fetch(&mut e, 0, 3, &[1]);
    let r10 = fetch(&mut e, 0, 1, &[2]).remove(0);
    let res = e.release_many(
        1,
        &[(id(1), r[0].fence), (id(10), r10.fence), (id(2), r[1].fence), (id(2), r[1].fence), (id(9), 1), (id(3), 1)],
    );
    assert_eq!(res, vec![true, true, true, false, false, false], "a duplicate pair is stale");
    let s = e.stats();
    assert_eq!((s.released_total, s.reserved, s.ready), (3, 1, 4));
    let got: Vec<_> = fetch(&mut e, 2, 10, &[1, 2]).iter().map(|r| (r.id, r.attempts)).collect();
    assert_eq!(got, vec![(id(1), 1), (id(2), 1), (id(4), 1), (id(10), 1)]);
}

#[test]
fn release_never_takes_attempts_below_zero() {
    let mut e = engine();
    // A reservation with no recorded attempt (only reachable by import).
    e.import(JobImage {
        id: id(1),
        channel: 1,
        state: State::Reserved,
        attempts: 0,
        time_ms: 0,
        reason: p(""),
        payload: p("a"),
    });
    e.release(0, id(1), 0).unwrap();
    assert_eq!(e.get(0, id(1)).unwrap().attempts, 0);
    // Replay is as careful.
    let mut r = engine();
    r.apply(Event::Pushed { id: id(2), channel: 1, due_ms: 0, payload: p("b") });
    r.apply(Event::Released { id: id(2) });
    let job = r.get(0, id(2)).unwrap();
    assert_eq!((job.state, job.attempts), (State::Ready, 0));
    assert_eq!(r.stats().ready, 1);
}

#[test]
fn released_jobs_replay_to_the_same_queues_and_attempts() {
    let mut e = engine();
    e.set_journal(true);
    for n in 1..=5 {
        e.push(0, 1, id(n), p("x"), None);
    }
    let r = fetch(&mut e, 0, 4, &[1]);
    e.retry(1, id(4), r[3].fence, 0).unwrap();
    let r4 = fetch(&mut e, 1, 1, &[1]).remove(0);
    assert_eq!(r4.id, id(5));
    e.release(2, id(2), r[1].fence).unwrap();
    assert_eq!(e.release_many(2, &[(id(5), r4.fence), (id(1), r[0].fence)]), vec![true, true]);
    let mut events = Vec::new();
    e.take_events(&mut events);
    assert_eq!(events.iter().filter(|ev| matches!(ev, Event::Released { .. })).count(), 3);

    let mut replayed = engine();
    for ev in events {
        replayed.apply(ev);
    }
    assert_eq!(replayed.finish_recovery(), 1, "job 3 is still reserved");
    let live: Vec<_> = fetch(&mut e, 3, 10, &[1]).iter().map(|r| (r.id, r.attempts)).collect();
    let back: Vec<_> = fetch(&mut replayed, 3, 10, &[1]).iter().map(|r| (r.id, r.attempts)).collect();
    // Live, job 3 is still reserved; after recovery it leads, attempt kept.
    assert_eq!(live, vec![(id(5), 1), (id(1), 1), (id(2), 1), (id(4), 2)]);
    assert_eq!(back, vec![(id(3), 2), (id(5), 1), (id(1), 1), (id(2), 1), (id(4), 2)]);
}

#[test]
fn cancelling_ready_jobs_does_not_grow_the_queue() {
    let mut e = engine();
    for n in 0..1000 {
        assert!(e.push(0, 7, id(n + 1), p("x"), None));
        assert!(e.cancel(0, id(n + 1)).unwrap());
    }
    assert_eq!(e.ready_queue_len(7), 0);
    assert!(e.push(0, 7, id(5000), p("y"), None));
    assert_eq!(fetch(&mut e, 0, 10, &[7]).len(), 1);
}

#[test]
fn due_times_and_deadlines_saturate_at_max_time() {
    let mut e = engine();
    let now = 1_700_000_000_000;
    e.push(now, 1, id(1), p("a"), None);
    let r = fetch(&mut e, now, 1, &[1]);
    e.extend(now, id(1), r[0].fence, u64::MAX).unwrap();
    e.retry(now, id(1), r[0].fence, i64::MAX as u64).unwrap();
    assert_eq!(e.get(now, id(1)).unwrap().due_ms, Some(MAX_TIME_MS));
    e.push(now, 1, id(2), p("b"), Some(u64::MAX));
    assert_eq!(e.get(now, id(2)).unwrap().due_ms, Some(MAX_TIME_MS));
    assert!(fetch(&mut e, now + 1_000_000, 2, &[1]).is_empty(), "never due");
}

/// Issue 18 item 13: the engine reports which channels got how many ready
/// jobs, whatever made them ready, so the server wakes only their waiters.
#[test]
fn readied_jobs_are_reported_per_channel() {
    let mut e = engine();
    let mut out = Vec::new();
    e.push(0, 1, id(1), p("a"), None);
    e.take_readied(&mut out);
    assert!(out.is_empty(), "not tracked until asked");
    e.track_readied();
    e.push(0, 1, id(2), p("b"), None);
    e.push_many(0, 2, 0, vec![(id(3), p("c")), (id(4), p("d"))]);
    e.push(0, 3, id(5), p("e"), Some(100));
    e.take_readied(&mut out);
    assert_eq!(out, vec![(1, 1), (2, 2)], "a scheduled job is not ready");
    out.clear();
    let r = fetch(&mut e, 0, 2, &[2]);
    e.release(0, r[0].id, r[0].fence).unwrap();
    e.retry(0, r[1].id, r[1].fence, 0).unwrap();
    e.ack(200, id(1), 999).unwrap_err(); // any operation's tick promotes the due job
    e.take_readied(&mut out);
    assert_eq!(out, vec![(2, 2), (3, 1)]);
    out.clear();
    let r = fetch(&mut e, 200, 1, &[1]);
    assert_eq!(r.len(), 1);
    e.tick(200 + 1_000);
    e.take_readied(&mut out);
    assert_eq!(out, vec![(1, 1)], "an expired lease");
}

/// Issue 18 item 16: per-channel gauges of a client spreading jobs over
/// many channel ids stay bounded by the live jobs past the first
/// EMPTY_CHANNELS_KEPT channels, and an emptied channel is not reported.
#[test]
fn per_channel_gauges_stay_bounded_when_jobs_spread_over_many_channels() {
    let mut e = engine();
    let n = (EMPTY_CHANNELS_KEPT + 500) as u32;
    for c in 0..n {
        assert!(e.push(0, c, id(u128::from(c)), p("x"), None));
    }
    assert_eq!(e.channels.len(), n as usize);
    let all: Vec<u32> = (0..n).collect();
    for r in fetch(&mut e, 1, n as usize, &all) {
        e.ack(2, r.id, r.fence).unwrap();
    }
    assert!(e.channels.len() <= EMPTY_CHANNELS_KEPT + 1, "{} entries for no live job", e.channels.len());
    assert!(e.channels(3, &[]).is_empty(), "emptied channels are not reported");
    assert_eq!(e.channels(3, &[7])[0].counts, ChannelCounts::default());
}
