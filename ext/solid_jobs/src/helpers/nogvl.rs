//! The one way this extension blocks: release the GVL (the calling Ractor's
//! lock), run Rust code, catch any panic before it can unwind into C, and
//! reacquire. The unblocking function lets Ruby interrupt the wait (signals,
//! Thread#kill, Ractor teardown).
//!
//! `rb_thread_call_without_gvl2` is used, not `..._gvl`: the latter checks
//! interrupts after reacquiring the GVL and may raise right there, which
//! would longjmp over these Rust frames (skipping destructors, and losing a
//! result such as a job just taken off a channel). `2` instead declines to
//! run while an interrupt is pending (a thread switch, a signal, a kill); we
//! then let Ruby handle it inside `protect`, so a raise comes back as an
//! `Err` that unwinds Rust normally, and try again.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use magnus::Error;
use solid_core::interrupt::Interrupt;

use super::errors;

struct Call<F, R> {
    f: Option<F>,
    out: Option<std::thread::Result<R>>,
}

unsafe extern "C" fn trampoline<F: FnOnce() -> R, R>(data: *mut c_void) -> *mut c_void {
    let call = &mut *(data as *mut Call<F, R>);
    if let Some(f) = call.f.take() {
        call.out = Some(catch_unwind(AssertUnwindSafe(f)));
    }
    std::ptr::null_mut()
}

unsafe extern "C" fn set_flag(data: *mut c_void) {
    (*(data as *const Interrupt)).trigger();
}

fn run_without_gvl<G: FnOnce() -> R, R>(g: G, flag: *const Interrupt) -> Result<R, Error> {
    let mut call = Call { f: Some(g), out: None };
    loop {
        unsafe {
            rb_sys::rb_thread_call_without_gvl2(
                Some(trampoline::<G, R>),
                &mut call as *mut _ as *mut c_void,
                Some(set_flag),
                flag as *mut c_void,
            );
        }
        match call.out.take() {
            Some(Ok(r)) => return Ok(r),
            Some(Err(panic)) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                return Err(errors::internal(&format!("panic in native code: {msg}")));
            }
            // Not run: an interrupt was pending. Handle it (a raise becomes
            // Err here, with every Rust frame still intact), then retry.
            None => {
                magnus::rb_sys::protect(|| {
                    unsafe { rb_sys::rb_thread_check_ints() };
                    rb_sys::Qnil as rb_sys::VALUE
                })?;
            }
        }
    }
}

/// Runs `f` without the GVL. `f` receives an [`Interrupt`] that Ruby's
/// unblocking function triggers; long waits select on it (or poll it) and
/// return early when it is set.
pub fn without_gvl<F, R>(f: F) -> Result<R, Error>
where
    F: FnOnce(&Interrupt) -> R,
{
    let interrupted = Interrupt::new();
    let flag: *const Interrupt = &interrupted;
    // SAFETY: `interrupted` outlives the call, which returns before this
    // frame does; the unblocking function only triggers it (atomics and a
    // non-blocking send).
    run_without_gvl(
        move || {
            let interrupted = unsafe { &*flag };
            // Lets the connection pool see the interrupt: a call Ruby wants
            // back is not retried (solid_core::interrupt::current_is_set).
            let _entered = interrupted.enter();
            f(interrupted)
        },
        flag,
    )
}
