//! A wait that Ruby can cut short. A worker blocked in native code (GVL
//! released) is woken by Ruby's unblocking function on a signal, a
//! `Thread#kill` or Ractor teardown. A flag alone would have to be polled,
//! which wakes every idle worker several times a second; `Interrupt` also
//! offers a channel to select on, so an idle worker sleeps until something
//! actually happens.

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::OnceLock;

use crossbeam_channel::{bounded, Receiver, Sender};

#[derive(Default)]
pub struct Interrupt {
    flag: AtomicBool,
    /// Created on the first blocking wait only: most calls find work at
    /// once and never need it.
    wake: OnceLock<(Sender<()>, Receiver<()>)>,
}

impl Interrupt {
    pub fn new() -> Self {
        Self::default()
    }

    /// Called by the unblocking function (any thread): sets the flag and
    /// wakes a waiter selecting on [`Interrupt::receiver`].
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        // Pairs with the fence in `receiver`: either the waiter sees the
        // flag, or this thread sees its channel and wakes it.
        fence(Ordering::SeqCst);
        if let Some((tx, _)) = self.wake.get() {
            let _ = tx.try_send(());
        }
    }

    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// The channel to select on while blocked. Callers check `is_set`
    /// after taking it (and before blocking), so a trigger that came before
    /// the channel existed is not missed.
    pub fn receiver(&self) -> &Receiver<()> {
        let rx = &self.wake.get_or_init(|| bounded(1)).1;
        fence(Ordering::SeqCst);
        rx
    }
}

thread_local! {
    /// The interrupt of the blocking call running on this thread, if any.
    static CURRENT: Cell<*const Interrupt> = const { Cell::new(std::ptr::null()) };
}

/// Marks an interrupt as the current thread's until dropped.
pub struct Entered {
    previous: *const Interrupt,
}

impl Interrupt {
    /// Makes this the interrupt of the blocking call now running on this
    /// thread, until the guard drops, so code deep inside the call (the
    /// connection pool, before it retries) can ask whether Ruby wants the
    /// thread back ([`current_is_set`]). The guard must not outlive `self`.
    pub fn enter(&self) -> Entered {
        Entered { previous: CURRENT.with(|c| c.replace(self as *const Interrupt)) }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// True when the blocking call running on this thread was interrupted by
/// Ruby (a signal, Thread#kill): work that would only prolong the call,
/// such as a retry, should be skipped. False outside such a call.
pub fn current_is_set() -> bool {
    CURRENT.with(|c| {
        let current = c.get();
        // SAFETY: set only by `enter`, whose guard restores the previous
        // value before the interrupt it points to goes away.
        !current.is_null() && unsafe { (*current).is_set() }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn the_entered_interrupt_is_the_threads_until_the_guard_drops() {
        let i = Interrupt::new();
        assert!(!current_is_set(), "outside any call");
        {
            let _entered = i.enter();
            assert!(!current_is_set());
            i.trigger();
            assert!(current_is_set());
            assert!(!std::thread::spawn(current_is_set).join().unwrap(), "another thread's call is not this one");
        }
        assert!(!current_is_set(), "the guard restored the previous state");
    }

    #[test]
    fn a_trigger_before_the_wait_is_seen() {
        let i = Interrupt::new();
        i.trigger();
        let _ = i.receiver();
        assert!(i.is_set());
    }

    #[test]
    fn a_trigger_during_the_wait_wakes_the_waiter() {
        let i = Arc::new(Interrupt::new());
        let rx = i.receiver().clone();
        assert!(!i.is_set());
        let t = {
            let i = i.clone();
            std::thread::spawn(move || {
                // Likely after the wait began (nothing shows it); a trigger before it is seen too.
                std::thread::sleep(Duration::from_millis(20));
                i.trigger()
            })
        };
        let started = Instant::now();
        assert!(rx.recv_timeout(Duration::from_secs(10)).is_ok(), "woken by the trigger, not the timeout");
        assert!(started.elapsed() < Duration::from_secs(10));
        t.join().unwrap();
    }
}
