//! Ruby glue for solid_core: value conversion, settings and error mapping
//! only; the behaviour lives in solid_core. One file per Ruby class under
//! `ruby_api/` (none imports another but for `Job`), shared helpers under
//! `helpers/`.

mod helpers;
mod ruby_api;

use magnus::{prelude::*, Error, Ruby};

#[magnus::init]
fn init(ruby: &Ruby) -> Result<(), Error> {
    // Must come before any method is defined: methods defined afterwards may
    // be called from any Ractor. Every handle they touch is Sync.
    unsafe { rb_sys::rb_ext_ractor_safe(true) };
    let solid = ruby.define_module("SolidJobs")?;
    let native = solid.define_module("Native")?;
    ruby_api::init(ruby, native)
}
