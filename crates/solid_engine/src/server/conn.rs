//! One client connection: read, decode, execute, confirm, reply.
//!
//! Pipelining is batched: the complete requests already received are
//! executed, their replies collect in one buffer, the log is confirmed once
//! for the whole batch (one write / one group-commit fsync), then the
//! replies go out in one write. Replies are never sent before the changes
//! they confirm are as durable as the mode promises.
//!
//! Memory is bounded per connection, whatever the client sends (issue 18):
//! - Output: once `output_buffer_bytes` of replies are pending (between
//!   two replies, or between two elements of one FETCH/DEAD reply) they
//!   are confirmed and written before anything else runs. The write blocks
//!   while the client does not read, and nothing more is read from the
//!   connection meanwhile: the kernel's socket buffers hold the client's
//!   further requests, not the server. Pending replies stay under
//!   `output_buffer_bytes` plus one reply element (one payload).
//! - Input: received but unexecuted bytes (the partial request, what the
//!   decoder holds of it, pipelined requests behind it) are capped by
//!   `max_request_bytes`, a bulk string by `max_payload_bytes` (refused from
//!   its header). Over a cap: `-PROTO ...`, then the connection is closed;
//!   before AUTH as after it.
//!
//! A connection starts in its handshake (see `Tracker`): it must
//! authenticate, or without a password complete a first request, within
//! `handshake_timeout_ms`. Only then does it take one of the
//! `max_connections` slots. A wrong password is answered after
//! `auth_failure_delay_ms` and closes the connection; an HTTP line closes it
//! at once, without a reply.

use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::dispatch::{execute, Flow, Session};
use super::listener::Stream;
use super::Shared;
use crate::command::{self, Reply};
use crate::error::Error;
use crate::resp::{Decoder, Mode};

const READ_CHUNK: usize = 64 << 10;
/// Buffers grown past this by one large request or reply are shrunk
/// afterwards, so an idle connection does not keep them.
const KEEP_CAPACITY: usize = 4 << 20;

struct Output<'a> {
    shared: &'a Shared,
    stream: Stream,
    /// A storage failure was reported: the connection must close, or later
    /// replies would be paired with the wrong requests.
    failed: bool,
}

impl Output<'_> {
    /// Confirms the session's log ticket, then writes and empties `buf`.
    /// A storage failure replaces it with one error: nothing is confirmed.
    fn flush(&mut self, session: &mut Session, buf: &mut Vec<u8>) -> Result<(), ()> {
        if self.failed {
            buf.clear();
            return Err(());
        }
        if session.ticket > 0 {
            let ticket = std::mem::take(&mut session.ticket);
            if let Some(storage) = &self.shared.storage {
                if let Err(e) = storage.confirm(ticket) {
                    buf.clear();
                    Reply::Error(e).encode(buf);
                    let _ = self.stream.write_all(buf);
                    buf.clear();
                    self.failed = true;
                    return Err(());
                }
            }
        }
        if buf.is_empty() {
            return Ok(());
        }
        let result = self.stream.write_all(buf).map_err(|_| ());
        buf.clear();
        if buf.capacity() > KEEP_CAPACITY {
            buf.shrink_to(64 << 10);
        }
        result
    }

    /// Sends an error that ends the connection, after the replies before
    /// it, and closes gracefully: the write side first, then what the
    /// client is still sending is read and dropped for a moment. Closing
    /// with unread input would make TCP reset the connection, and the
    /// client could lose the error before reading it.
    fn fail(&mut self, session: &mut Session, buf: &mut Vec<u8>, error: Error) {
        if self.flush(session, buf).is_err() {
            return;
        }
        Reply::Error(error).encode(buf);
        if self.flush(session, buf).is_err() {
            return;
        }
        self.stream.shutdown(std::net::Shutdown::Write);
        let until = Instant::now() + Duration::from_millis(500);
        let mut sink = vec![0u8; READ_CHUNK];
        let mut drained = 0usize;
        while drained < 64 << 20 {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stream.set_read_timeout(Some(left)).is_err() {
                return;
            }
            match self.stream.read(&mut sink) {
                Ok(0) | Err(_) => return,
                Ok(n) => drained += n,
            }
        }
    }
}

/// HTTP probes are logged at most once a second: the log must not be a
/// way to fill the disk.
fn log_cross_protocol() {
    static LAST_MS: AtomicU64 = AtomicU64::new(0);
    let now = crate::now_ms();
    let last = LAST_MS.load(Ordering::Relaxed);
    if now.saturating_sub(last) >= 1000
        && LAST_MS.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    {
        crate::log(format_args!(
            "possible security attack: an HTTP request (POST/GET/Host:) reached the RESP port; connection closed"
        ));
    }
}

/// Ends the handshake once the session is authenticated: the connection
/// moves to the established class, or is refused if that class is full.
fn establish(shared: &Shared, id: u64, established: &mut bool, reader: &Stream) -> Result<(), Error> {
    shared.tracker.establish(id, shared.config.max_connections)?;
    *established = true;
    let idle = shared.config.idle_timeout_ms;
    let _ = reader.set_read_timeout((idle > 0).then(|| Duration::from_millis(idle)));
    Ok(())
}

/// Serves connection `id` until the client leaves, QUIT, a protocol error,
/// or server shutdown (which closes the read side); `established` tells the
/// tracker, at the end, which class the connection was in.
pub(crate) fn serve(shared: &Shared, stream: Stream, id: u64, established: &mut bool) {
    let Ok(mut reader) = stream.try_clone() else { return };
    let config = &shared.config;
    let bound = config.output_buffer_bytes;
    let mut out = Output { shared, stream, failed: false };
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut session = Session::new(config.password.is_none(), id);
    session.watch(reader.raw_fd());
    let handshake_deadline = Instant::now() + Duration::from_millis(config.handshake_timeout_ms);
    let mut decoder = Decoder::with_max_bulk(Mode::Request, config.max_payload_bytes);
    let mut input: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut start = 0;
    loop {
        loop {
            let frame = match decoder.decode(&input[start..]) {
                Ok((used, frame)) => {
                    start += used;
                    frame
                }
                Err(e) => return out.fail(&mut session, &mut buf, e),
            };
            let Some(frame) = frame else { break };
            // Without a password the first complete request ends the
            // handshake, before it runs (a refused one must change nothing).
            if !*established && session.authed {
                if let Err(e) = establish(shared, id, established, &reader) {
                    return out.fail(&mut session, &mut buf, e);
                }
            }
            let (mut reply, flow) = match command::parse(frame) {
                Ok(cmd) => {
                    let mut before_block = |s: &mut Session| {
                        let _ = out.flush(s, &mut buf);
                    };
                    execute(shared, &mut session, cmd, &mut before_block)
                }
                Err(Error::CrossProtocol) => {
                    log_cross_protocol();
                    let _ = out.flush(&mut session, &mut buf);
                    return;
                }
                Err(e @ Error::Proto(_)) => (Reply::Error(e), Flow::Close),
                Err(e) => (Reply::Error(e), Flow::Continue),
            };
            if out.failed {
                // A FETCH confirmed earlier replies before blocking and the
                // storage failed: its error is sent; nothing else may follow.
                return;
            }
            // AUTH or HELLO AUTH just succeeded.
            if !*established && session.authed {
                if let Err(e) = establish(shared, id, established, &reader) {
                    return out.fail(&mut session, &mut buf, e);
                }
            }
            if let Flow::AuthFailed = flow {
                // The delay is served holding the connection's slot
                // (pinned, so a newer connection cannot evict it): a
                // guesser gets at most max_unauthenticated guesses per
                // delay, whatever it pipelines or however it reconnects.
                // Requests pipelined behind the guess are never read.
                shared.tracker.pin(id);
                let _ = out.flush(&mut session, &mut buf);
                std::thread::sleep(Duration::from_millis(config.auth_failure_delay_ms));
                std::mem::replace(&mut reply, Reply::Ok).encode_for(&mut buf, session.resp3);
                let _ = out.flush(&mut session, &mut buf);
                return;
            }
            let resp3 = session.resp3;
            let sent = reply.encode_bounded_for(&mut buf, resp3, bound, &mut |b| out.flush(&mut session, b).is_ok());
            if !sent {
                return;
            }
            if let Flow::Close = flow {
                let _ = out.flush(&mut session, &mut buf);
                return;
            }
        }
        if out.flush(&mut session, &mut buf).is_err() {
            return;
        }
        // Drop consumed input; keep the partial request.
        input.drain(..start);
        start = 0;
        if !*established {
            let left = handshake_deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || reader.set_read_timeout(Some(left)).is_err() {
                return handshake_timeout(shared, &mut out, &mut session, &mut buf);
            }
        }
        let len = input.len();
        let unexecuted = len.saturating_add(decoder.held_bytes());
        if unexecuted > config.max_request_bytes {
            let why = format!("request over max_request_bytes ({})", config.max_request_bytes);
            return out.fail(&mut session, &mut buf, Error::Proto(why));
        }
        if len < READ_CHUNK && input.capacity() > KEEP_CAPACITY {
            input.shrink_to(READ_CHUNK);
        }
        // Grow by half rather than doubling: a request near the cap must
        // not leave twice the cap allocated.
        if input.capacity() < len + READ_CHUNK {
            input.reserve_exact((len / 2).max(READ_CHUNK));
        }
        // Read no further than just past the cap.
        let room = (config.max_request_bytes - unexecuted + 1).min(READ_CHUNK);
        input.resize(len + room, 0);
        match reader.read(&mut input[len..]) {
            Err(e) if e.kind() == ErrorKind::Interrupted => input.truncate(len),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if *established {
                    let why = format!("idle timeout: nothing received for {} ms", config.idle_timeout_ms);
                    Reply::Error(Error::Invalid(why)).encode(&mut buf);
                    let _ = out.flush(&mut session, &mut buf);
                    return;
                }
                return handshake_timeout(shared, &mut out, &mut session, &mut buf);
            }
            Ok(0) | Err(_) => return,
            Ok(n) => input.truncate(len + n),
        }
    }
}

fn handshake_timeout(shared: &Shared, out: &mut Output<'_>, session: &mut Session, buf: &mut Vec<u8>) {
    let what = if shared.config.password.is_some() { "authenticate" } else { "send a first request" };
    Reply::Error(Error::Invalid(format!("handshake timeout: {what} within {} ms", shared.config.handshake_timeout_ms)))
        .encode(buf);
    let _ = out.flush(session, buf);
}
