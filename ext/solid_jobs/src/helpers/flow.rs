//! Flow control on the producer side (docs/flow-control.md): the
//! `meta.flow` of a limited task's envelopes, from what `Publisher` sends,
//! `[group, limit, [key material, ...]]` for a concurrency limit, followed
//! by an optional fourth element `[group, limit, window_ms, slack_ms, [key
//! material, ...]]` for a rate limit; a rate-only task sends `[nil, nil, nil, rate]`.
//! A material is nil when the task has no `key:` (one key for the group).

use magnus::{prelude::*, Error, RArray, Ruby, TryConvert, Value};
use serde_json::Value as Json;
use solid_core::envelope::Envelope;
use solid_core::flow::{concurrency, meta_into, with_rate, FlowSpec};

use super::convert::to_json;
use super::errors::{arg_error, to_ruby as err};

/// The task's limits as Ruby sent them: per limit its group, figures and
/// one key material per job.
pub struct Flow {
    pub concurrency: Option<(String, u64, Vec<Value>)>,
    /// (group, limit, window ms = per + slack, slack ms, materials).
    pub rate: Option<(String, u64, u64, u64, Vec<Value>)>,
}

fn materials(list: RArray, jobs: usize, exact: bool) -> Result<Vec<Value>, Error> {
    let materials: Vec<Value> = list.into_iter().collect();
    if materials.len() != jobs && (exact || materials.len() < jobs) {
        return Err(arg_error("a limited task's push needs one key material per argument list".into()));
    }
    Ok(materials)
}

impl Flow {
    /// The flow of a push of `jobs` jobs (one material each).
    pub fn parse(flow: RArray, jobs: usize) -> Result<Flow, Error> {
        Self::parse_checked(flow, jobs, true)
    }

    /// The flow of a publication's jobs, of which the first `jobs` at least.
    pub fn parse_for(flow: RArray, jobs: usize) -> Result<Flow, Error> {
        Self::parse_checked(flow, jobs, false)
    }

    fn parse_checked(flow: RArray, jobs: usize, exact: bool) -> Result<Flow, Error> {
        let parts: Vec<Value> = flow.into_iter().collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(arg_error("a limited task's flow is [group, limit, materials(, rate)]".into()));
        }
        let concurrency = if parts[1].is_nil() {
            None
        } else {
            let group: String = TryConvert::try_convert(parts[0])?;
            let limit: u64 = TryConvert::try_convert(parts[1])?;
            Some((group, limit, materials(TryConvert::try_convert(parts[2])?, jobs, exact)?))
        };
        let rate = match parts.get(3) {
            Some(r) if !r.is_nil() => {
                let (group, limit, window_ms, slack_ms, list): (String, u64, u64, u64, RArray) =
                    TryConvert::try_convert(*r)?;
                Some((group, limit, window_ms, slack_ms, materials(list, jobs, exact)?))
            }
            _ => None,
        };
        if concurrency.is_none() && rate.is_none() {
            return Err(arg_error("a limited task's flow names no limit".into()));
        }
        Ok(Flow { concurrency, rate })
    }

    /// Job `i`'s envelope `env` with its flow meta.
    pub fn apply(&self, ruby: &Ruby, env: Envelope, i: usize) -> Result<Envelope, Error> {
        let json = |material: Value, what: &str| -> Result<Json, Error> {
            if material.is_nil() {
                Ok(Json::Null)
            } else {
                to_json(ruby, material, &format!("the {what} key of job {i}"))
            }
        };
        let (mut spec, mut label) = (FlowSpec::default(), None);
        if let Some((group, limit, materials)) = &self.concurrency {
            (spec, label) = concurrency(group, *limit, &json(materials[i], "concurrency")?);
        }
        if let Some((group, limit, window_ms, slack_ms, materials)) = &self.rate {
            let material = json(materials[i], "rate")?;
            // One label per job: the concurrency key's when there is one.
            if label.is_none() {
                label = match &material {
                    Json::Null => None,
                    Json::String(s) => Some(s.clone()),
                    other => Some(other.to_string()),
                };
            }
            spec = with_rate(spec, group, *limit, *window_ms, *slack_ms, &material);
        }
        let mut meta = env.meta.clone().unwrap_or_default();
        meta_into(&mut meta, &spec, label.as_deref()).map_err(err)?;
        env.with_meta(meta).map_err(err)
    }
}
