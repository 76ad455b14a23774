//! `solid-engine-bench`: end-to-end throughput of a running server over its
//! Unix socket. P producer connections push J jobs with PUSHMANY batches of
//! B; C consumer connections FETCH up to B at a time and ACKMANY them. The
//! figure reported is J divided by the time from the first push to the
//! last ack.

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

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("solid-engine-bench: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
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
