//! The one way this extension blocks: release the GVL (the calling Ractor's
//! lock), run Rust code, catch any panic before it can unwind into C, and
//! reacquire. The unblocking function lets Ruby interrupt the wait (signals,
//! Thread#kill, Ractor teardown).

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use magnus::Error;

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
    (*(data as *const AtomicBool)).store(true, Ordering::Release);
}

fn call_without_gvl<G: FnOnce() -> R, R>(g: G, flag: *const AtomicBool) -> Option<std::thread::Result<R>> {
    let mut call = Call { f: Some(g), out: None };
    unsafe {
        rb_sys::rb_thread_call_without_gvl(
            Some(trampoline::<G, R>),
            &mut call as *mut _ as *mut c_void,
            Some(set_flag),
            flag as *mut c_void,
        );
    }
    call.out
}

/// Runs `f` without the GVL. `f` receives a flag that Ruby's unblocking
/// function sets; long waits must poll it and return early when set.
pub fn without_gvl<F, R>(f: F) -> Result<R, Error>
where
    F: FnOnce(&AtomicBool) -> R,
{
    let interrupted = AtomicBool::new(false);
    let flag: *const AtomicBool = &interrupted;
    // SAFETY: `interrupted` outlives the call, which returns before this
    // frame does; the unblocking function only stores to the atomic.
    let out = call_without_gvl(move || f(unsafe { &*flag }), flag);
    match out {
        Some(Ok(r)) => Ok(r),
        Some(Err(panic)) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(errors::internal(&format!("panic in native code: {msg}")))
        }
        // Interrupted before the function started.
        None => Err(errors::internal("native call was interrupted before it ran")),
    }
}
