//! Protocol fuzzing: the property check shared by the libFuzzer target
//! (`fuzz/fuzz_targets/protocol.rs`) and a stable-Rust random mutator
//! ([`fuzz_for`], run by `fuzz/run.sh` when cargo-fuzz is unavailable).
//!
//! Properties checked on any input bytes:
//! 1. Neither the RESP decoder, the command parser nor the engine panics
//!    (debug builds also check every integer overflow).
//! 2. Decoding is independent of how the input is split into reads.
//! 3. Every decoded frame re-encodes to bytes that decode to the same frame.
//! 4. Error replies are single lines (no CR/LF inside).

use std::time::{Duration, Instant};

use crate::command::{self, Command, Reply};
use crate::engine::{Engine, EngineConfig, JobId};
use crate::resp::{self, Decoder, Frame, Mode};

/// Decodes everything, feeding the input in chunks of the given sizes
/// (cycled). Returns the frames and whether decoding ended in an error.
fn decode_all(data: &[u8], chunks: &[usize]) -> (Vec<Frame>, bool) {
    let mut decoder = Decoder::new(Mode::Request);
    let mut buf = Vec::new();
    let mut frames = Vec::new();
    let mut fed = 0;
    let mut i = 0;
    while fed < data.len() {
        let n = chunks[i % chunks.len()].clamp(1, data.len() - fed);
        i += 1;
        buf.extend_from_slice(&data[fed..fed + n]);
        fed += n;
        loop {
            match decoder.decode(&buf) {
                Ok((used, frame)) => {
                    buf.drain(..used);
                    match frame {
                        Some(f) => frames.push(f),
                        None => break,
                    }
                }
                Err(_) => return (frames, true),
            }
        }
    }
    (frames, false)
}

/// Checks the properties on one input; panics on a violation.
pub fn check(data: &[u8]) {
    let (frames, failed) = decode_all(data, &[usize::MAX]);
    // Split points derived from the input itself, so the fuzzer explores them.
    let chunks: Vec<usize> = data.iter().take(16).map(|&b| usize::from(b % 17) + 1).collect();
    if !chunks.is_empty() {
        let (again, failed_again) = decode_all(data, &chunks);
        assert_eq!(frames, again, "decoding depends on read boundaries");
        assert_eq!(failed, failed_again, "error depends on read boundaries");
    }
    let mut engine = Engine::new(EngineConfig { lease_ms: 50, completed_retention_ms: 200, dead_max: 8 });
    engine.set_journal(true);
    let mut events = Vec::new();
    for (now, frame) in (1u64..).map(|t| t * 7).zip(frames) {
        let bytes = frame.to_bytes();
        match resp::parse_frame(&bytes, Mode::Request) {
            Ok(Some((same, used))) => {
                assert_eq!(same, frame, "re-encoded frame decodes differently");
                assert_eq!(used, bytes.len());
            }
            other => panic!("re-encoded frame does not decode: {other:?}"),
        }
        match command::parse(frame) {
            Ok(cmd) => drive(&mut engine, now, cmd),
            Err(e) => {
                let mut out = Vec::new();
                Reply::Error(e).encode(&mut out);
                assert!(!out[..out.len() - 2].contains(&b'\n') && !out[..out.len() - 2].contains(&b'\r'));
            }
        }
        engine.take_events(&mut events);
    }
    let stats = engine.stats();
    let total = stats.ready + stats.scheduled + stats.reserved + stats.completed + stats.dead + stats.cancelled;
    assert_eq!(total, engine.job_count() as u64, "state gauges drifted");
}

/// Runs a parsed command against the engine, like the server would.
fn drive(engine: &mut Engine, now: u64, cmd: Command) {
    let mut out = Vec::new();
    let reply = match cmd {
        Command::Push { channel, id, payload, due } => {
            Reply::Int(engine.push(now, channel, id, payload, due.map(|d| d.at(now))).into())
        }
        Command::PushMany { channel, due, jobs } => {
            Reply::Int(engine.push_many(now, channel, due.at(now), jobs) as i64)
        }
        Command::Fetch { count, lease_ms, channels, .. } => {
            let mut reserved = Vec::new();
            engine.fetch(now, count, lease_ms, &channels, &mut reserved);
            Reply::Reservations(reserved)
        }
        Command::Ack { id, fence } => engine.ack(now, id, fence).map_or_else(Reply::Error, |_| Reply::Ok),
        Command::AckMany(pairs) => Reply::Ints(engine.ack_many(now, &pairs)),
        Command::Retry { id, fence, delay_ms } => {
            engine.retry(now, id, fence, delay_ms).map_or_else(Reply::Error, |_| Reply::Ok)
        }
        Command::Fail { id, fence, reason } => {
            engine.fail(now, id, fence, reason).map_or_else(Reply::Error, |_| Reply::Ok)
        }
        Command::Extend { id, fence, lease_ms } => {
            engine.extend(now, id, fence, lease_ms).map_or_else(Reply::Error, |_| Reply::Ok)
        }
        Command::Release { id, fence } => engine.release(now, id, fence).map_or_else(Reply::Error, |_| Reply::Ok),
        Command::ReleaseMany(pairs) => {
            Reply::Ints(engine.release_many(now, &pairs).into_iter().map(i64::from).collect())
        }
        Command::Get(id) => engine.get(now, id).map_or(Reply::Nil, Reply::Job),
        Command::Cancel(id) => engine.cancel(now, id).map_or_else(Reply::Error, |c| Reply::Int(c.into())),
        Command::Dead(count) => Reply::Dead(engine.dead(count)),
        _ => Reply::Ok,
    };
    reply.encode(&mut out);
    assert!(resp::parse_frame(&out, Mode::Reply).expect("replies are valid RESP").is_some());
}

/// xorshift64*: deterministic, dependency-free randomness for the mutator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Valid requests the mutator starts from.
fn seeds() -> Vec<Vec<u8>> {
    let id = JobId(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef).to_string();
    let id2 = JobId(7).to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["PING"],
        vec!["PUSH", "1", &id, "payload"],
        vec!["PUSH", "2", &id2, "p", "AT", "30"],
        vec!["PUSHMANY", "1", "0", &id, "a", &id2, "b"],
        vec!["FETCH", "10", "0", "0", "1", "2"],
        vec!["ACK", &id, "1"],
        vec!["ACKMANY", &id, "1", &id2, "2"],
        vec!["RETRY", &id, "1", "5"],
        vec!["FAIL", &id, "2", "boom"],
        vec!["EXTEND", &id2, "3", "100"],
        vec!["RELEASE", &id, "4"],
        vec!["RELEASEMANY", &id, "5", &id2, "6"],
        vec!["GET", &id],
        vec!["CANCEL", &id2],
        vec!["DEAD", "3"],
        vec!["STATS"],
    ];
    let mut out: Vec<Vec<u8>> = commands
        .iter()
        .map(|c| {
            let mut buf = Vec::new();
            resp::write_command(&mut buf, c);
            buf
        })
        .collect();
    out.push(b"PING\r\n".to_vec());
    out.push(format!("get {id}\r\n").into_bytes());
    out
}

const TOKENS: &[&[u8]] =
    &[b"\r\n", b"*", b"$", b":", b"+", b"-", b"-1", b"0", b"99999999999", b"\n", b"*1\r\n", b"$0\r\n"];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(6) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(len + 1);
                input.insert(i, rng.next() as u8);
            }
            2 if len > 0 => {
                let i = rng.below(len);
                let n = rng.below(len - i) + 1;
                input.drain(i..i + n.min(8));
            }
            3 => {
                let i = rng.below(len + 1);
                let token = TOKENS[rng.below(TOKENS.len())];
                input.splice(i..i, token.iter().copied());
            }
            4 if len > 0 => {
                let i = rng.below(len);
                let n = (rng.below(len - i) + 1).min(64);
                let copy = input[i..i + n].to_vec();
                let at = rng.below(len + 1);
                input.splice(at..at, copy);
            }
            _ if len > 0 => {
                input.truncate(rng.below(len));
            }
            _ => {}
        }
    }
}

/// Mutates valid requests for `duration`: every unmutated sequence must
/// decode to exactly the requests encoded, every mutated one must pass
/// [`check`]. Returns the number of inputs tried.
pub fn fuzz_for(duration: Duration, seed: u64) -> u64 {
    let seeds = seeds();
    let mut rng = Rng(seed | 1);
    let start = Instant::now();
    let mut runs = 0u64;
    while start.elapsed() < duration {
        let picks: Vec<usize> = (0..=rng.below(5)).map(|_| rng.below(seeds.len())).collect();
        let mut input: Vec<u8> = picks.iter().flat_map(|&i| seeds[i].iter().copied()).collect();
        let (frames, failed) = decode_all(&input, &[usize::MAX]);
        assert!(!failed && frames.len() == picks.len(), "valid requests must decode one frame each");
        check(&input);
        mutate(&mut rng, &mut input);
        check(&input);
        runs += 2;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzz_smoke_one_second() {
        let runs = fuzz_for(Duration::from_secs(1), 0x5eed);
        assert!(runs > 100, "only {runs} runs");
    }

    /// `SOLID_FUZZ_SECONDS=60 cargo test -p solid_engine --release -- --ignored fuzz_long`
    #[test]
    #[ignore]
    fn fuzz_long() {
        let secs = std::env::var("SOLID_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
        let seed = std::env::var("SOLID_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(crate::now_ms);
        let runs = fuzz_for(Duration::from_secs(secs), seed);
        eprintln!("fuzz: {runs} inputs in {secs} s (seed {seed}), no failure");
    }

    #[test]
    fn known_tricky_inputs() {
        for input in [
            &b""[..],
            b"\r\n",
            b"*1\r\n*1\r\n",
            b"$-1\r\n",
            b"*2\r\n$4\r\nPING\r\n",
            b"\x00\xff\r\n",
            b"*1\r\n$0\r\n\r\n",
        ] {
            check(input);
        }
    }
}
