//! One client connection: read, decode, execute, confirm, reply.
//!
//! Pipelining is batched: every complete request already received is
//! executed, their replies collect in one buffer, the log is confirmed once
//! for the whole batch (one write / one group-commit fsync), then the
//! replies go out in one write. Replies are never sent before the changes
//! they confirm are as durable as the mode promises.
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

struct Output<'a> {
    shared: &'a Shared,
    stream: Stream,
    buf: Vec<u8>,
    /// A storage failure was reported: the connection must close, or later
    /// replies would be paired with the wrong requests.
    failed: bool,
}

impl Output<'_> {
    /// Confirms the session's log ticket, then writes the pending replies.
    /// A storage failure replaces them with one error: nothing is confirmed.
    fn flush(&mut self, session: &mut Session) -> Result<(), ()> {
        if session.ticket > 0 {
            let ticket = std::mem::take(&mut session.ticket);
            if let Some(storage) = &self.shared.storage {
                if let Err(e) = storage.confirm(ticket) {
                    self.buf.clear();
                    Reply::Error(e).encode(&mut self.buf);
                    let _ = self.stream.write_all(&self.buf);
                    self.buf.clear();
                    self.failed = true;
                    return Err(());
                }
            }
        }
        if self.buf.is_empty() {
            return Ok(());
        }
        let result = self.stream.write_all(&self.buf).map_err(|_| ());
        self.buf.clear();
        if self.buf.capacity() > 4 << 20 {
            self.buf.shrink_to(64 << 10);
        }
        result
    }
}

/// Serves the connection until the client leaves, QUIT, a protocol error,
/// or server shutdown (which closes the read side).
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

/// Serves connection `id`; `established` tells the tracker, at the end,
/// which class the connection was in.
pub(crate) fn serve(shared: &Shared, stream: Stream, id: u64, established: &mut bool) {
    let Ok(mut reader) = stream.try_clone() else { return };
    let mut out = Output { shared, stream, buf: Vec::with_capacity(16 << 10), failed: false };
    let mut session = Session::new(shared.config.password.is_none(), id);
    let handshake_deadline = Instant::now() + Duration::from_millis(shared.config.handshake_timeout_ms);
    let mut decoder = Decoder::new(Mode::Request);
    let mut input: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut start = 0;
    loop {
        loop {
            let frame = match decoder.decode(&input[start..]) {
                Ok((used, frame)) => {
                    start += used;
                    frame
                }
                Err(e) => {
                    // Replies to earlier requests first, then the error, then close.
                    if out.flush(&mut session).is_ok() {
                        Reply::Error(e).encode(&mut out.buf);
                        let _ = out.flush(&mut session);
                    }
                    return;
                }
            };
            let Some(frame) = frame else { break };
            // Without a password the first complete request ends the
            // handshake, before it runs (a refused one must change nothing).
            if !*established && session.authed {
                if let Err(e) = establish(shared, id, established, &reader) {
                    Reply::Error(e).encode(&mut out.buf);
                    let _ = out.flush(&mut session);
                    return;
                }
            }
            let (mut reply, flow) = match command::parse(frame) {
                Ok(cmd) => {
                    let mut before_block = |s: &mut Session| {
                        let _ = out.flush(s);
                    };
                    execute(shared, &mut session, cmd, &mut before_block)
                }
                Err(Error::CrossProtocol) => {
                    log_cross_protocol();
                    let _ = out.flush(&mut session);
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
                    Reply::Error(e).encode(&mut out.buf);
                    let _ = out.flush(&mut session);
                    return;
                }
            }
            match flow {
                Flow::Continue => {}
                Flow::Close => {
                    reply.encode_for(&mut out.buf, session.resp3);
                    let _ = out.flush(&mut session);
                    return;
                }
                Flow::AuthFailed => {
                    // The delay is served holding the connection's slot
                    // (pinned, so a newer connection cannot evict it): a
                    // guesser gets at most max_unauthenticated guesses per
                    // delay, whatever it pipelines or however it reconnects.
                    // Requests pipelined behind the guess are never read.
                    shared.tracker.pin(id);
                    let _ = out.flush(&mut session);
                    std::thread::sleep(Duration::from_millis(shared.config.auth_failure_delay_ms));
                    std::mem::replace(&mut reply, Reply::Ok).encode_for(&mut out.buf, session.resp3);
                    let _ = out.flush(&mut session);
                    return;
                }
            }
            reply.encode_for(&mut out.buf, session.resp3);
        }
        if out.flush(&mut session).is_err() {
            return;
        }
        // Drop consumed input; keep the partial request.
        input.drain(..start);
        start = 0;
        if !*established {
            let left = handshake_deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || reader.set_read_timeout(Some(left)).is_err() {
                handshake_timeout(shared, &mut out, &mut session);
                return;
            }
        }
        let len = input.len();
        input.resize(len + READ_CHUNK, 0);
        match reader.read(&mut input[len..]) {
            Err(e) if e.kind() == ErrorKind::Interrupted => input.truncate(len),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if *established {
                    Reply::Error(Error::Invalid(format!(
                        "idle timeout: nothing received for {} ms",
                        shared.config.idle_timeout_ms
                    )))
                    .encode(&mut out.buf);
                    let _ = out.flush(&mut session);
                } else {
                    handshake_timeout(shared, &mut out, &mut session);
                }
                return;
            }
            Ok(0) | Err(_) => return,
            Ok(n) => input.truncate(len + n),
        }
    }
}

fn handshake_timeout(shared: &Shared, out: &mut Output<'_>, session: &mut Session) {
    let what = if shared.config.password.is_some() { "authenticate" } else { "send a first request" };
    Reply::Error(Error::Invalid(format!("handshake timeout: {what} within {} ms", shared.config.handshake_timeout_ms)))
        .encode(&mut out.buf);
    let _ = out.flush(session);
}
