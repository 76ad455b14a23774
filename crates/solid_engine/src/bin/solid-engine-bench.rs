//! `solid-engine-bench`: end-to-end throughput of a running server over its
//! Unix socket. P producer connections push J jobs with PUSHMANY batches of
//! B; C consumer connections FETCH up to B at a time and ACKMANY them. The
//! figure reported is J divided by the time from the first push to the
//! last ack.
//!
//! With `--compaction-probe N` it measures instead what a compaction costs
//! the clients: it loads N jobs (into a channel nobody fetches, so every
//! one of them is in the snapshot), then a bulk client churns PUSHMANY /
//! FETCH / ACKMANY on a second channel until the log outgrows twice the
//! live state and the server compacts, while a probe client runs single
//! PUSH, FETCH, ACK on a third and times each operation. It reports p50,
//! p99 and max of the probe's operations that overlapped a compaction (as
//! STATS `compacting` / `compactions_total` showed it, polled every 2 ms),
//! and of the others (the same load without a compaction running).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use solid_engine::engine::JobId;
use solid_engine::resp::{write_array_header, write_bulk, Decoder, Frame, Mode};

const USAGE: &str = "\
solid-engine-bench: push+fetch+ack throughput against a running solid-engine-server

USAGE: solid-engine-bench --socket PATH [OPTIONS]

OPTIONS:
  --socket PATH        the server's Unix socket (required)
  --jobs N             jobs to push and process (default 1000000)
  --batch B            jobs per PUSHMANY / FETCH / ACKMANY (default 1000)
  --producers P        producer connections (default 2)
  --consumers C        consumer connections (default 2)
  --payload-bytes S    payload size (default 100)
  --channel ID         channel to use (default 1)
  --password SECRET    AUTH first
  --compaction-probe N load N jobs, then time single operations while the
                       server compacts (see the module docs); --jobs is
                       then the most churn jobs to push before a
                       compaction starts (the churn goes on while it runs)
";

#[derive(Clone)]
struct Options {
    socket: String,
    jobs: u64,
    batch: usize,
    producers: usize,
    consumers: usize,
    payload_bytes: usize,
    channel: u32,
    password: Option<String>,
    compaction_probe: Option<u64>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        socket: String::new(),
        jobs: 1_000_000,
        batch: 1000,
        producers: 2,
        consumers: 2,
        payload_bytes: 100,
        channel: 1,
        password: None,
        compaction_probe: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            print!("{USAGE}");
            std::process::exit(0);
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|_| format!("{flag}: '{v}' is not a number"));
        match flag.as_str() {
            "--socket" => o.socket = value,
            "--jobs" => o.jobs = num(&value)?,
            "--batch" => o.batch = num(&value)? as usize,
            "--producers" => o.producers = num(&value)? as usize,
            "--consumers" => o.consumers = num(&value)? as usize,
            "--payload-bytes" => o.payload_bytes = num(&value)? as usize,
            "--channel" => o.channel = num(&value)? as u32,
            "--password" => o.password = Some(value),
            "--compaction-probe" => o.compaction_probe = Some(num(&value)?),
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    if o.socket.is_empty() {
        return Err("--socket is required".into());
    }
    if o.batch == 0 || o.producers == 0 || o.consumers == 0 || o.jobs == 0 {
        return Err("--jobs, --batch, --producers and --consumers must be at least 1".into());
    }
    Ok(o)
}

struct Conn {
    stream: UnixStream,
    decoder: Decoder,
    buf: Vec<u8>,
    start: usize,
}

impl Conn {
    fn open(o: &Options) -> Result<Conn, String> {
        let stream = UnixStream::connect(&o.socket).map_err(|e| format!("connect {}: {e}", o.socket))?;
        let mut conn = Conn { stream, decoder: Decoder::new(Mode::Reply), buf: Vec::with_capacity(1 << 20), start: 0 };
        if let Some(password) = &o.password {
            let mut req = Vec::new();
            write_array_header(&mut req, 2);
            write_bulk(&mut req, b"AUTH");
            write_bulk(&mut req, password.as_bytes());
            match conn.request(&req)? {
                Frame::Simple(_) => {}
                other => return Err(format!("AUTH failed: {other:?}")),
            }
        }
        Ok(conn)
    }

    fn request(&mut self, req: &[u8]) -> Result<Frame, String> {
        self.stream.write_all(req).map_err(|e| format!("write: {e}"))?;
        loop {
            let (used, frame) = self.decoder.decode(&self.buf[self.start..]).map_err(|e| e.to_string())?;
            self.start += used;
            if let Some(frame) = frame {
                if self.start == self.buf.len() {
                    self.buf.clear();
                    self.start = 0;
                }
                return match frame {
                    Frame::Error(e) => Err(String::from_utf8_lossy(&e).into_owned()),
                    other => Ok(other),
                };
            }
            self.buf.drain(..self.start);
            self.start = 0;
            let len = self.buf.len();
            self.buf.resize(len + (256 << 10), 0);
            let n = self.stream.read(&mut self.buf[len..]).map_err(|e| format!("read: {e}"))?;
            self.buf.truncate(len + n);
            if n == 0 {
                return Err("server closed the connection".into());
            }
        }
    }
}

fn producer(o: &Options, index: usize, jobs: u64, barrier: &Barrier) -> Result<Duration, String> {
    let mut conn = Conn::open(o)?;
    let payload = vec![b'x'; o.payload_bytes];
    // Distinct ids without a random number per job: random run prefix,
    // producer number and sequence.
    let prefix = JobId::random().0 & !((1u128 << 64) - 1);
    let channel = o.channel.to_string();
    let mut req = Vec::with_capacity(o.batch * (o.payload_bytes + 60) + 64);
    barrier.wait();
    let started = Instant::now();
    let mut sent = 0u64;
    while sent < jobs {
        let n = (jobs - sent).min(o.batch as u64);
        req.clear();
        write_array_header(&mut req, 3 + 2 * n as usize);
        write_bulk(&mut req, b"PUSHMANY");
        write_bulk(&mut req, channel.as_bytes());
        write_bulk(&mut req, b"0");
        for i in 0..n {
            let id = JobId(prefix | ((index as u128) << 48) | u128::from(sent + i));
            write_bulk(&mut req, &id.encode());
            write_bulk(&mut req, &payload);
        }
        match conn.request(&req)? {
            Frame::Integer(created) if created as u64 == n => {}
            other => return Err(format!("PUSHMANY answered {other:?}")),
        }
        sent += n;
    }
    Ok(started.elapsed())
}

fn consumer(o: &Options, total: u64, acked: &AtomicU64, barrier: &Barrier) -> Result<(), String> {
    let mut conn = Conn::open(o)?;
    let mut fetch = Vec::new();
    write_array_header(&mut fetch, 5);
    for arg in ["FETCH", &o.batch.to_string(), "0", "100", &o.channel.to_string()] {
        write_bulk(&mut fetch, arg.as_bytes());
    }
    let mut ack = Vec::with_capacity(o.batch * 64);
    barrier.wait();
    while acked.load(Ordering::Relaxed) < total {
        let Frame::Array(reserved) = conn.request(&fetch)? else { return Err("FETCH: not an array".into()) };
        if reserved.is_empty() {
            continue;
        }
        ack.clear();
        write_array_header(&mut ack, 1 + 2 * reserved.len());
        write_bulk(&mut ack, b"ACKMANY");
        for r in &reserved {
            let Frame::Array(fields) = r else { return Err("FETCH: bad reservation".into()) };
            let (Some(Frame::Bulk(id)), Some(Frame::Integer(fence))) = (fields.first(), fields.get(2)) else {
                return Err("FETCH: bad reservation fields".into());
            };
            write_bulk(&mut ack, id);
            write_bulk(&mut ack, fence.to_string().as_bytes());
        }
        let Frame::Array(results) = conn.request(&ack)? else { return Err("ACKMANY: not an array".into()) };
        let ok = results.iter().filter(|r| **r == Frame::Integer(1)).count() as u64;
        acked.fetch_add(ok, Ordering::Relaxed);
    }
    Ok(())
}

fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut req = Vec::new();
    write_array_header(&mut req, args.len());
    for arg in args {
        write_bulk(&mut req, arg);
    }
    req
}

fn stats(conn: &mut Conn) -> Result<(bool, u64), String> {
    let Frame::Bulk(body) = conn.request(&command(&[b"STATS"]))? else { return Err("STATS: not a bulk".into()) };
    let body = String::from_utf8_lossy(&body);
    let field = |key: &str| {
        body.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(':')))
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("STATS has no {key}: {body}"))
    };
    Ok((field("compacting")? == 1, field("compactions_total")?))
}

/// PUSHMANY `n` jobs of `o.payload_bytes` into `channel`, ids from `prefix`.
fn push_batch(conn: &mut Conn, o: &Options, channel: u32, prefix: u128, first: u64, n: u64) -> Result<(), String> {
    let payload = vec![b'x'; o.payload_bytes];
    let mut req = Vec::with_capacity(n as usize * (o.payload_bytes + 60) + 64);
    write_array_header(&mut req, 3 + 2 * n as usize);
    write_bulk(&mut req, b"PUSHMANY");
    write_bulk(&mut req, channel.to_string().as_bytes());
    write_bulk(&mut req, b"0");
    for i in 0..n {
        write_bulk(&mut req, &JobId(prefix | u128::from(first + i)).encode());
        write_bulk(&mut req, &payload);
    }
    match conn.request(&req)? {
        Frame::Integer(created) if created as u64 == n => Ok(()),
        other => Err(format!("PUSHMANY answered {other:?}")),
    }
}

/// FETCH up to `count` from `channel` and ACKMANY them; how many were acked.
fn fetch_ack(conn: &mut Conn, count: usize, channel: u32) -> Result<usize, String> {
    let fetch = command(&[b"FETCH", count.to_string().as_bytes(), b"0", b"0", channel.to_string().as_bytes()]);
    let Frame::Array(reserved) = conn.request(&fetch)? else { return Err("FETCH: not an array".into()) };
    if reserved.is_empty() {
        return Ok(0);
    }
    let mut ack = Vec::with_capacity(reserved.len() * 64);
    write_array_header(&mut ack, 1 + 2 * reserved.len());
    write_bulk(&mut ack, b"ACKMANY");
    for r in &reserved {
        let Frame::Array(fields) = r else { return Err("FETCH: bad reservation".into()) };
        let (Some(Frame::Bulk(id)), Some(Frame::Integer(fence))) = (fields.first(), fields.get(2)) else {
            return Err("FETCH: bad reservation fields".into());
        };
        write_bulk(&mut ack, id);
        write_bulk(&mut ack, fence.to_string().as_bytes());
    }
    let Frame::Array(results) = conn.request(&ack)? else { return Err("ACKMANY: not an array".into()) };
    Ok(results.len())
}

/// One timed operation of the probe: when it started and how long it took.
struct Op {
    start: Duration,
    took: Duration,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// How long the compaction probe runs at most before a compaction has ended.
const COMPACTION_BOUND: Duration = Duration::from_secs(120);

fn compaction_probe(o: &Options, preload: u64) -> Result<(), String> {
    const HELD: u32 = 2;
    const CHURN: u32 = 3;
    const PROBE: u32 = 1;
    let prefix = JobId::random().0 & !((1u128 << 64) - 1);
    let mut loader = Conn::open(o)?;
    let started = Instant::now();
    let mut loaded = 0;
    while loaded < preload {
        let n = (preload - loaded).min(o.batch as u64);
        push_batch(&mut loader, o, HELD, prefix | (1 << 60), loaded, n)?;
        loaded += n;
    }
    let load_time = started.elapsed();
    let (_, compactions_before) = stats(&mut loader)?;

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let epoch = Instant::now();
    // Polls STATS: compaction windows as [last poll that saw none running,
    // first poll that saw it over] (wide rather than narrow).
    let monitor = {
        let (o, stop) = (o.clone(), stop.clone());
        thread::spawn(move || -> Result<(Vec<(Duration, Duration)>, u64), String> {
            let mut conn = Conn::open(&o)?;
            let mut windows = Vec::new();
            let (mut last_idle, mut open, mut seen) = (Duration::ZERO, None, compactions_before);
            while !stop.load(Ordering::Relaxed) {
                let asked = epoch.elapsed();
                let (running, total) = stats(&mut conn)?;
                let now = epoch.elapsed();
                match (running || total > seen, open) {
                    (true, None) => open = Some(last_idle),
                    (false, Some(from)) => {
                        windows.push((from, now));
                        open = None;
                    }
                    _ => {}
                }
                if total > seen && !running {
                    if let Some(from) = open.take() {
                        windows.push((from, now));
                    }
                }
                seen = total;
                if !running {
                    last_idle = asked;
                }
                thread::sleep(Duration::from_millis(2));
            }
            if let Some(from) = open {
                windows.push((from, epoch.elapsed()));
            }
            Ok((windows, seen - compactions_before))
        })
    };
    // The churn grows the log until the server compacts, and goes on
    // while the compaction runs (the probe measures under it), until the
    // probe has seen one finish. A compaction runs at a lower priority, so
    // on a loaded host it may end long after `--jobs` churned jobs; the
    // churn stopping at a count once failed the probe while the
    // compaction it had started was still running.
    let churned = Arc::new(AtomicU64::new(0));
    let churn = {
        let (o, stop, churned) = (o.clone(), stop.clone(), churned.clone());
        thread::spawn(move || -> Result<u64, String> {
            let mut conn = Conn::open(&o)?;
            let mut pushed = 0;
            while !stop.load(Ordering::Relaxed) {
                push_batch(&mut conn, &o, CHURN, prefix | (2 << 60), pushed, o.batch as u64)?;
                pushed += o.batch as u64;
                let mut acked = 0;
                while acked < o.batch {
                    acked += fetch_ack(&mut conn, o.batch - acked, CHURN)?;
                }
                churned.store(pushed, Ordering::Relaxed);
            }
            Ok(pushed)
        })
    };
    let mut probe = Conn::open(o)?;
    let mut ops = Vec::new();
    let mut checker = Conn::open(o)?;
    let mut done_at = None;
    let payload = vec![b'x'; o.payload_bytes];
    let mut n = 0u64;
    let result = (|| -> Result<(), String> {
        loop {
            let id = JobId(prefix | (3 << 60) | u128::from(n)).encode();
            n += 1;
            let t = epoch.elapsed();
            probe.request(&command(&[b"PUSH", PROBE.to_string().as_bytes(), &id, &payload]))?;
            ops.push(Op { start: t, took: epoch.elapsed() - t });
            let t = epoch.elapsed();
            let Frame::Array(mut got) = probe.request(&command(&[b"FETCH", b"1", b"0", b"0", b"1"]))? else {
                return Err("probe FETCH: not an array".into());
            };
            ops.push(Op { start: t, took: epoch.elapsed() - t });
            let Some(Frame::Array(fields)) = got.pop() else { return Err("probe FETCH: nothing reserved".into()) };
            let Some(Frame::Integer(fence)) = fields.get(2) else { return Err("probe FETCH: no fence".into()) };
            let t = epoch.elapsed();
            probe.request(&command(&[b"ACK", &id, fence.to_string().as_bytes()]))?;
            ops.push(Op { start: t, took: epoch.elapsed() - t });
            if n.is_multiple_of(64) {
                let (running, total) = stats(&mut checker)?;
                match done_at {
                    None if total > compactions_before && !running => done_at = Some(Instant::now()),
                    Some(at) if at.elapsed() > Duration::from_millis(300) => return Ok(()),
                    _ => {}
                }
                // The churn ends only on `stop` or an error, which its
                // join below returns.
                if churn.is_finished() {
                    return Err("the churn client stopped".into());
                }
                // Hang guards, not timings: `--jobs` churned jobs without a
                // compaction starting is a log threshold the churn cannot
                // reach; the whole probe has COMPACTION_BOUND to see one end.
                let started = running || total > compactions_before;
                if !started && churned.load(Ordering::Relaxed) >= o.jobs {
                    return Err(format!("{} churned jobs and the server did not start compacting", o.jobs));
                }
                if done_at.is_none() && epoch.elapsed() > COMPACTION_BOUND {
                    return Err(format!("no compaction finished within {} s", COMPACTION_BOUND.as_secs()));
                }
            }
        }
    })();
    stop.store(true, Ordering::Relaxed);
    let pushed = churn.join().expect("churn thread")?;
    let (windows, compactions) = monitor.join().expect("monitor thread")?;
    result?;
    let overlaps = |op: &Op| windows.iter().any(|&(a, b)| op.start <= b && op.start + op.took >= a);
    let (during, outside): (Vec<&Op>, Vec<&Op>) = ops.iter().partition(|op| overlaps(op));
    let sorted = |ops: Vec<&Op>| {
        let mut t: Vec<Duration> = ops.iter().map(|op| op.took).collect();
        t.sort_unstable();
        t
    };
    let (during, outside) = (sorted(during), sorted(outside));
    let window: Duration = windows.iter().map(|&(a, b)| b - a).sum();
    println!(
        "compaction probe: preload={preload} jobs ({:.3} s) churn_jobs={pushed} compactions={compactions} \
         compaction_window_ms={:.0}",
        load_time.as_secs_f64(),
        ms(window)
    );
    println!(
        "during compaction: ops={} p50_ms={:.3} p99_ms={:.3} max_ms={:.3}",
        during.len(),
        ms(percentile(&during, 0.50)),
        ms(percentile(&during, 0.99)),
        ms(during.last().copied().unwrap_or_default())
    );
    println!(
        "outside compaction: ops={} p50_ms={:.3} p99_ms={:.3} max_ms={:.3}",
        outside.len(),
        ms(percentile(&outside, 0.50)),
        ms(percentile(&outside, 0.99)),
        ms(outside.last().copied().unwrap_or_default())
    );
    if compactions == 0 || during.is_empty() {
        return Err("no probe operation overlapped a compaction".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("solid-engine-bench: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Some(preload) = o.compaction_probe {
        return match compaction_probe(&o, preload) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("compaction probe failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let acked = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(o.producers + o.consumers + 1));
    let mut producers = Vec::new();
    for p in 0..o.producers {
        let share = o.jobs / o.producers as u64 + u64::from((p as u64) < o.jobs % o.producers as u64);
        let (o, barrier) = (o.clone(), barrier.clone());
        producers.push(thread::spawn(move || producer(&o, p, share, &barrier)));
    }
    let mut consumers = Vec::new();
    for _ in 0..o.consumers {
        let (o, barrier, acked) = (o.clone(), barrier.clone(), acked.clone());
        consumers.push(thread::spawn(move || consumer(&o, o.jobs, &acked, &barrier)));
    }
    barrier.wait();
    let started = Instant::now();
    let mut failed = false;
    let mut push_time = Duration::ZERO;
    for p in producers {
        match p.join().expect("producer thread") {
            Ok(d) => push_time = push_time.max(d),
            Err(e) => {
                eprintln!("producer failed: {e}");
                failed = true;
                // Let the consumers stop: nothing more will come.
                acked.store(u64::MAX, Ordering::Relaxed);
            }
        }
    }
    for c in consumers {
        if let Err(e) = c.join().expect("consumer thread") {
            eprintln!("consumer failed: {e}");
            failed = true;
        }
    }
    let total = started.elapsed();
    if failed {
        return ExitCode::FAILURE;
    }
    let rate = |d: Duration| o.jobs as f64 / d.as_secs_f64();
    println!(
        "jobs={} batch={} producers={} consumers={} payload_bytes={}",
        o.jobs, o.batch, o.producers, o.consumers, o.payload_bytes
    );
    println!("push: {:.0} jobs/s ({:.3} s)", rate(push_time), push_time.as_secs_f64());
    println!("push+fetch+ack end to end: {:.0} jobs/s ({:.3} s)", rate(total), total.as_secs_f64());
    ExitCode::SUCCESS
}
