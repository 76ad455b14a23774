//! Concurrency limits on the producer side (docs/flow-control.md): the
//! `meta.flow` of a limited task's envelopes, from what `Publisher` sends,
//! `[group, limit, [key material, ...]]` (a material is nil when the task
//! has no `key:`: one key for the whole group).

use magnus::{prelude::*, Error, RArray, Ruby, TryConvert, Value};
use serde_json::Value as Json;
use solid_core::envelope::Envelope;
use solid_core::flow::{concurrency, meta_into};

use super::convert::to_json;
use super::errors::{arg_error, to_ruby as err};

/// The task's limit as Ruby sent it: group, limit and one key material per
/// job.
pub struct Flow {
    pub group: String,
    pub limit: u64,
    pub materials: Vec<Value>,
}

impl Flow {
    pub fn parse(flow: RArray, jobs: usize) -> Result<Flow, Error> {
        let (group, limit, materials): (String, u64, RArray) = TryConvert::try_convert(flow.as_value())?;
        let materials: Vec<Value> = materials.into_iter().collect();
        if materials.len() != jobs {
            return Err(arg_error("a limited task's push needs one key material per argument list".into()));
        }
        Ok(Flow { group, limit, materials })
    }
}

/// `env` with the flow meta of key `material` (nil: the group's one key)
/// inserted in its fixed place (before a unique lock).
pub fn with_flow(
    ruby: &Ruby,
    env: Envelope,
    group: &str,
    limit: u64,
    material: Value,
    path: &str,
) -> Result<Envelope, Error> {
    let material = if material.is_nil() { Json::Null } else { to_json(ruby, material, path)? };
    let (spec, label) = concurrency(group, limit, &material);
    let mut meta = env.meta.clone().unwrap_or_default();
    meta_into(&mut meta, &spec, label.as_deref()).map_err(err)?;
    env.with_meta(meta).map_err(err)
}
