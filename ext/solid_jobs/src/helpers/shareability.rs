//! What `Ractor.make_shareable` would meet in an object graph, read without
//! changing anything. `Ractor.make_shareable` freezes each object as it
//! enters it and raises at the first one it cannot share, so a refused
//! graph is left half-frozen; `SolidJobs::Shareable` (lib/solid_jobs/
//! shareable.rb) walks the graph with these two readers first, and only
//! calls it when nothing would be refused. Both only read object headers and
//! instance variable tables: no Ruby method of the object is called.

use magnus::rb_sys::{AsRawValue, FromRawValue};
use magnus::{prelude::*, Error, RArray, Ruby, Symbol, Value};
use rb_sys::{ruby_value_type, st_data_t, ID, VALUE};

/// How make_shareable treats `obj` when it is not shareable yet:
/// `:proc` (checked on its own: self and captured variables),
/// `:refused` (a C object that can never be shared: Mutex, Monitor,
/// Thread, StringIO...), `:frozen_data` (a C object whose type declares it
/// shareable once frozen), or `:object` (frozen, then its references are
/// visited).
pub fn kind(ruby: &Ruby, obj: Value) -> Symbol {
    let raw = obj.as_raw();
    let name = unsafe {
        if rb_sys::SPECIAL_CONST_P(raw) || !rb_sys::RB_TYPE_P(raw, ruby_value_type::RUBY_T_DATA) {
            "object"
        } else if rb_sys::TEST(rb_sys::rb_obj_is_proc(raw)) {
            "proc"
        } else if rb_sys::RTYPEDDATA_P(raw)
            && ((*rb_sys::RTYPEDDATA_TYPE(raw)).flags
                & rb_sys::rbimpl_typeddata_flags::RUBY_TYPED_FROZEN_SHAREABLE as VALUE)
                != 0
        {
            "frozen_data"
        } else {
            "refused"
        }
    };
    ruby.to_symbol(name)
}

unsafe extern "C" fn collect(id: ID, value: VALUE, arg: st_data_t) -> std::os::raw::c_int {
    let out = &mut *(arg as *mut Vec<(ID, VALUE)>);
    out.push((id, value));
    rb_sys::st_retval::ST_CONTINUE as std::os::raw::c_int
}

/// `[[name, value], ...]` for every instance variable of `obj`, including
/// the internal ones Ruby code cannot list (an exception's message and
/// backtrace): make_shareable visits those too.
pub fn instance_values(ruby: &Ruby, obj: Value) -> Result<RArray, Error> {
    let mut pairs: Vec<(ID, VALUE)> = Vec::new();
    // The values stay reachable from `obj` (held by the caller) while they
    // are collected: nothing runs between the iteration and the Array below
    // that could change obj's variables.
    unsafe { rb_sys::rb_ivar_foreach(obj.as_raw(), Some(collect), &mut pairs as *mut _ as st_data_t) };
    let out = ruby.ary_new_capa(pairs.len());
    for (id, value) in pairs {
        let name = unsafe { rb_sys::rb_id2str(id) };
        let name = if name == 0 || rb_sys::NIL_P(name) {
            ruby.str_new("(internal)").as_value()
        } else {
            unsafe { Value::from_raw(name) }
        };
        let value = unsafe { Value::from_raw(value) };
        out.push(ruby.ary_new_from_values(&[name, value]))?;
    }
    Ok(out)
}
