//! N worker nodes in one process, each a real `RedisSource` (its own
//! connections and heartbeat, fetcher, acker and subscriber threads) serving
//! one channel (node i serves `ch{i % channels}`), with `--workers` no-op
//! worker threads each. Driven by benchmark/nodes.rb, which measures Redis
//! around each phase:
//!
//!   node_scaling --redis-url URL --nodes N [--channels 20] [--workers 1]
//!                [--rate 1000] [--settle 2] --phase idle:20 --phase load:20
//!
//! Protocol on stdout/stdin, one JSON object per line: `{"ready":..}` once
//! every node is registered and settled; per phase `{"phase":..,"start":true}`,
//! then it waits for a line on stdin (the harness read Redis), runs the
//! phase (`load`: one producer thread enqueues `--rate` single jobs/s
//! round robin over the channels through `Store::enqueue`), prints the
//! phase's per-node counters and waits for another line.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use solid_core::channel_order::ChannelOrder;
use solid_core::prefetch::Prefetch;
use solid_core::redis::connection::{Connector, Timeouts};
use solid_core::redis::keyspace::Keyspace;
use solid_core::redis::source::{RedisSource, RedisSourceConfig};
use solid_core::redis::store::{ArchivePolicy, Store};
use solid_core::source::JobSource;
use solid_core::{now_ms, Envelope};

struct Args {
    url: String,
    nodes: usize,
    channels: usize,
    workers: usize,
    rate: u64,
    settle: u64,
    phases: Vec<(String, u64)>,
}

fn args() -> Args {
    let mut a =
        Args { url: String::new(), nodes: 1, channels: 20, workers: 1, rate: 1000, settle: 2, phases: Vec::new() };
    let mut it = std::env::args().skip(1);
    while let (Some(flag), Some(value)) = (it.next(), it.next()) {
        let number = || value.parse::<u64>().unwrap_or_else(|_| panic!("{flag}: not a number: {value}"));
        match flag.as_str() {
            "--redis-url" => a.url = value.clone(),
            "--nodes" => a.nodes = number() as usize,
            "--channels" => a.channels = number() as usize,
            "--workers" => a.workers = number() as usize,
            "--rate" => a.rate = number(),
            "--settle" => a.settle = number(),
            "--phase" => {
                let (name, secs) = value.split_once(':').expect("--phase name:seconds");
                a.phases.push((name.to_owned(), secs.parse().expect("--phase seconds")));
            }
            _ => panic!("unknown flag {flag}"),
        }
    }
    assert!(!a.url.is_empty(), "--redis-url is required");
    a
}

/// A node, and what its workers saw: jobs run, and jobs from a channel it
/// does not serve (never, by construction; counted to show it).
struct Node {
    source: Arc<RedisSource>,
    ran: Arc<AtomicU64>,
    foreign: Arc<AtomicU64>,
}

/// [claims, empty claims, doorbell messages, jobs run, foreign jobs] of a node.
fn counters(n: &Node) -> [u64; 5] {
    let stats = n.source.stats();
    [
        stats.claim_calls.load(Relaxed),
        stats.empty_claims.load(Relaxed),
        n.source.doorbell_messages(),
        n.ran.load(Relaxed),
        n.foreign.load(Relaxed),
    ]
}

/// Lets 200 nodes (about 5 connections each) open their sockets.
fn raise_fd_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn start_node(a: &Args, i: usize) -> Node {
    let channel = format!("ch{}", i % a.channels);
    let cfg = RedisSourceConfig {
        redis_url: a.url.clone(),
        namespace: "solid_jobs".into(),
        node_id: format!("bench-node-{i}"),
        channels: vec![(channel.clone(), 1)],
        order: ChannelOrder::Weighted,
        prefetch: Prefetch::Adaptive { workers: a.workers },
        heartbeat_interval: Duration::from_secs(5),
        node_ttl: Duration::from_secs(30),
        description: json!({"host": "node_scaling", "pid": std::process::id(), "node": i}).to_string(),
        archive: ArchivePolicy::default(),
        timeouts: Timeouts::default(),
        schedules: Vec::new(),
    };
    let source = Arc::new(RedisSource::start(cfg).expect("start node"));
    let (ran, foreign) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    for _ in 0..a.workers {
        let (source, ran, foreign, channel) = (source.clone(), ran.clone(), foreign.clone(), channel.clone());
        // Blocks until a job comes (no polling: an idle node's threads
        // sleep); ends with the process.
        std::thread::spawn(move || {
            while let Ok(mut job) = source.jobs().recv() {
                source.taken(&mut job);
                if job.channel != channel {
                    foreign.fetch_add(1, Relaxed);
                }
                source.complete(&job);
                ran.fetch_add(1, Relaxed);
            }
        });
    }
    Node { source, ran, foreign }
}

/// Enqueues `rate` single jobs a second, round robin over the channels,
/// until `stop`; returns how many.
fn produce(a: &Args, stop: &AtomicBool) -> u64 {
    let store = Store::new(Keyspace::new("solid_jobs"));
    let mut conn = Connector::with_timeouts(&a.url, Timeouts::default()).unwrap().connect().unwrap();
    let started = Instant::now();
    let mut sent = 0u64;
    while !stop.load(Relaxed) {
        let due = started + Duration::from_secs_f64(sent as f64 / a.rate as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let channel = format!("ch{}", sent % a.channels as u64);
        let env = Envelope::build("Noop", json!([sent]), &channel, 3, now_ms(), now_ms()).unwrap();
        store.enqueue(&mut conn, &channel, &[env.encode()]).expect("enqueue");
        sent += 1;
    }
    sent
}

fn say(line: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|_| out.flush()).expect("stdout");
}

fn wait_for_harness(lines: &mut impl Iterator<Item = std::io::Result<String>>) {
    lines.next().expect("harness closed stdin").expect("stdin");
}

fn main() {
    raise_fd_limit();
    let a = args();
    let started = Instant::now();
    let nodes: Vec<Node> = (0..a.nodes).map(|i| start_node(&a, i)).collect();
    let start_seconds = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(a.settle));
    say(json!({"ready": true, "nodes": a.nodes, "start_seconds": start_seconds}));
    let mut lines = std::io::stdin().lock().lines();
    for (phase, seconds) in &a.phases {
        say(json!({"phase": phase, "start": true}));
        wait_for_harness(&mut lines);
        let before: Vec<[u64; 5]> = nodes.iter().map(counters).collect();
        let began = Instant::now();
        let stop = AtomicBool::new(false);
        let enqueued = std::thread::scope(|scope| {
            let producer = (phase == "load").then(|| scope.spawn(|| produce(&a, &stop)));
            std::thread::sleep(Duration::from_secs(*seconds));
            stop.store(true, Relaxed);
            producer.map_or(0, |p| p.join().expect("producer"))
        });
        let elapsed = began.elapsed().as_secs_f64();
        let per_node: Vec<Vec<u64>> = nodes
            .iter()
            .zip(&before)
            .map(|(n, b)| counters(n).iter().zip(b).map(|(after, before)| after - before).collect())
            .collect();
        say(json!({"phase": phase, "seconds": elapsed, "enqueued": enqueued,
                   "columns": ["claims", "empty_claims", "doorbells", "ran", "foreign"], "nodes": per_node}));
        wait_for_harness(&mut lines);
    }
    std::thread::scope(|scope| {
        for n in &nodes {
            scope.spawn(|| n.source.shutdown(Duration::from_secs(5)));
        }
    });
}
