//! Redis' own time per call of the scripts a busy node sends (decision 51):
//! `claim.lua` and `ack.lua` as two calls per batch, against `ack_claim.lua`
//! as one, at several batch sizes. Driven by benchmark/scripts.rb:
//!
//!   script_cost --redis-url URL [--rounds 300]
//!
//! Prints one JSON object per line: batch, script, calls, usec per call
//! (INFO commandstats' `usec` of EVALSHA: the script and the commands it
//! runs, as Redis times them) and commands run inside per call.

use serde_json::json;
use solid_core::claim::ClaimToken;
use solid_core::redis::connection::{Connector, Timeouts};
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::store::Store;
use solid_core::{now_ms, Envelope};

/// (EVALSHA calls, EVALSHA usec, calls of every other command but INFO).
fn stats(c: &mut redis::Connection) -> (u64, u64, u64) {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).expect("INFO");
    let field = |line: &str, name: &str| -> u64 {
        line.split(&format!("{name}="))
            .nth(1)
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let (mut calls, mut usec, mut inner) = (0, 0, 0);
    for line in info.lines().filter(|l| l.starts_with("cmdstat_")) {
        if line.starts_with("cmdstat_evalsha:") {
            (calls, usec) = (field(line, "calls"), field(line, "usec"));
        } else if !line.starts_with("cmdstat_info:") {
            inner += field(line, "calls");
        }
    }
    (calls, usec, inner)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut url, mut rounds) = (String::new(), 300usize);
    while let (Some(flag), Some(value)) = (args.next(), args.next()) {
        match flag.as_str() {
            "--redis-url" => url = value,
            "--rounds" => rounds = value.parse().expect("--rounds: a number"),
            _ => panic!("unknown flag {flag}"),
        }
    }
    let mut c = Connector::with_timeouts(&url, Timeouts::default()).expect("url").connect().expect("connect");
    for batch in [1usize, 12, 100] {
        let store = Store::new(Keyspace::new(&format!("cost{batch}")));
        store.heartbeat(&mut c, "n1", 600_000, "{}", &["default"], 0).expect("heartbeat");
        let envs: Vec<String> = (0..batch * rounds * 2 + batch)
            .map(|i| {
                Envelope::build("Task", json!([i, "an argument"]), "default", 3, now_ms(), now_ms()).unwrap().encode()
            })
            .collect();
        for chunk in envs.chunks(1000) {
            store.enqueue(&mut c, "default", chunk).expect("enqueue");
        }
        let mut totals = [(0u64, 0u64, 0u64); 3];
        let mut measured = |c: &mut redis::Connection, slot: usize, f: &mut dyn FnMut(&mut redis::Connection)| {
            let before = stats(c);
            f(c);
            let after = stats(c);
            let t = &mut totals[slot];
            t.0 += after.0 - before.0;
            t.1 += after.1 - before.1;
            t.2 += after.2 - before.2;
        };
        let done = |jobs: &[solid_core::ClaimedJob]| -> Vec<(ClaimToken, String)> {
            jobs.iter().map(|j| (j.token, j.envelope.id.clone())).collect()
        };
        let mut carried = done(&store.claim(&mut c, "n1", &["default"], batch, now_ms()).unwrap().jobs);
        for _ in 0..rounds {
            let mut claimed = Vec::new();
            measured(&mut c, 0, &mut |c| claimed = store.claim(c, "n1", &["default"], batch, now_ms()).unwrap().jobs);
            let acks = done(&claimed);
            measured(&mut c, 1, &mut |c| assert!(store.ack_resendable(c, "n1", &acks).unwrap().is_empty()));
            measured(&mut c, 2, &mut |c| {
                let (stale, next) = store.ack_claim(c, "n1", &carried, &["default"], batch, now_ms()).unwrap();
                assert!(stale.is_empty());
                carried = done(&next.unwrap().jobs);
            });
        }
        for (slot, script) in ["claim", "ack", "ack_claim"].into_iter().enumerate() {
            let (calls, usec, inner) = totals[slot];
            let line = json!({"batch": batch, "script": script, "calls": calls,
                              "usec_per_call": usec as f64 / calls as f64, "inner_per_call": inner as f64 / calls as f64});
            println!("{line}");
        }
    }
}
