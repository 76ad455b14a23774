//! One raw command on a pooled connection, for the inspection tools and
//! tests of both backends (`Client#call`, `EngineClient#call`). Never used
//! on the job path.

use magnus::{prelude::*, Error, IntoValue, RArray, RString, Ruby, Value};
use solid_core::redis::connection::Pool;
use solid_core::redis_rs as redis;

use super::errors::{arg_error, to_ruby as err};
use super::nogvl::without_gvl;

/// Sends one raw command (an Array of Strings) on a pooled connection.
pub fn raw_call(pool: &Pool, args: RArray) -> Result<Value, Error> {
    let mut parts: Vec<Vec<u8>> = Vec::with_capacity(args.len());
    for a in args.into_iter() {
        let s = RString::from_value(a).ok_or_else(|| arg_error("call takes Strings".into()))?;
        parts.push(unsafe { s.as_slice() }.to_vec());
    }
    let Some((name, rest)) = parts.split_first() else {
        return Err(arg_error("call needs a command".into()));
    };
    let reply = without_gvl(|_| {
        pool.with(|c| {
            let mut cmd = redis::cmd(std::str::from_utf8(name).unwrap_or("PING"));
            for p in rest {
                cmd.arg(p.as_slice());
            }
            cmd.query::<redis::Value>(c).map_err(solid_core::Error::from)
        })
    })?
    .map_err(err)?;
    redis_to_ruby(&reply)
}

fn redis_to_ruby(v: &redis::Value) -> Result<Value, Error> {
    let ruby = Ruby::get().expect("GVL");
    Ok(match v {
        redis::Value::Nil => ruby.qnil().as_value(),
        redis::Value::Int(i) => (*i).into_value_with(&ruby),
        redis::Value::BulkString(b) => ruby.str_from_slice(b).as_value(),
        redis::Value::SimpleString(s) => ruby.str_new(s).as_value(),
        redis::Value::Okay => ruby.str_new("OK").as_value(),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            let a = ruby.ary_new_capa(items.len());
            for i in items {
                a.push(redis_to_ruby(i)?)?;
            }
            a.as_value()
        }
        redis::Value::Map(pairs) => {
            let h = ruby.hash_new();
            for (k, v) in pairs {
                h.aset(redis_to_ruby(k)?, redis_to_ruby(v)?)?;
            }
            h.as_value()
        }
        redis::Value::Double(d) => (*d).into_value_with(&ruby),
        redis::Value::Boolean(b) => (*b).into_value_with(&ruby),
        other => ruby.str_new(&format!("{other:?}")).as_value(),
    })
}
