//! The node's control mailbox on this side: requests the heartbeat took
//! from Redis wait here for the node's monitor thread, which also receives
//! the instrumenter's events ([`super::delivery`]) in the same wait.

use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, Select, Sender};

use super::delivery::{Deliveries, Delivery};
use crate::interrupt::Interrupt;

pub(super) struct Mailbox {
    requests_tx: Sender<String>,
    requests_rx: Receiver<String>,
    /// Wakes a `notices` wait early (the monitor is stopping).
    wake_tx: Sender<()>,
    wake_rx: Receiver<()>,
}

impl Mailbox {
    pub fn new() -> Self {
        let (requests_tx, requests_rx) = unbounded();
        let (wake_tx, wake_rx) = bounded(1);
        Mailbox { requests_tx, requests_rx, wake_tx, wake_rx }
    }

    /// A control request taken from the node's mailbox by its heartbeat.
    pub fn request(&self, request: String) {
        let _ = self.requests_tx.send(request);
    }

    /// Ends a `notices` wait now (the monitor is stopping).
    pub fn wake_monitor(&self) {
        let _ = self.wake_tx.try_send(());
    }

    /// Waits up to `timeout` for control requests or `deliveries` and
    /// returns whatever is waiting; returns early (empty) on `wake_monitor`
    /// or when `interrupted` is triggered. Nothing polls: an idle monitor
    /// sleeps for the whole timeout.
    pub fn notices(
        &self,
        deliveries: &Deliveries,
        timeout: Duration,
        interrupted: &Interrupt,
    ) -> (Vec<String>, Vec<Delivery>) {
        let take = || -> (Vec<String>, Vec<Delivery>) { (self.requests_rx.try_iter().collect(), deliveries.take()) };
        let (requests, waiting) = take();
        if !requests.is_empty() || !waiting.is_empty() || self.wake_rx.try_recv().is_ok() {
            return (requests, waiting);
        }
        let mut select = Select::new();
        select.recv(&self.requests_rx);
        select.recv(deliveries.receiver());
        let wake = select.recv(&self.wake_rx);
        let woken = select.recv(interrupted.receiver());
        if interrupted.is_set() {
            return (requests, waiting);
        }
        // `ready` only says which channel has something; nothing is taken
        // here, so whatever arrived is collected below.
        match select.ready_timeout(timeout) {
            Ok(i) if i == wake => {
                let _ = self.wake_rx.try_recv();
                (Vec::new(), Vec::new())
            }
            Ok(i) if i == woken => (Vec::new(), Vec::new()),
            _ => take(),
        }
    }
}
