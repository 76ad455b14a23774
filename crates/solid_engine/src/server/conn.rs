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

use std::io::{Read, Write};
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

/// Serves the connection until the client leaves, QUIT, a protocol error,
/// or server shutdown (which closes the read side).
pub(crate) fn serve(shared: &Shared, stream: Stream) {
    let Ok(mut reader) = stream.try_clone() else { return };
    let config = &shared.config;
    let bound = config.output_buffer_bytes;
    let mut out = Output { shared, stream, failed: false };
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut session = Session::new(config.password.is_none());
    session.watch(reader.raw_fd());
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
            let (reply, flow) = match command::parse(frame) {
                Ok(cmd) => {
                    let mut before_block = |s: &mut Session| {
                        let _ = out.flush(s, &mut buf);
                    };
                    execute(shared, &mut session, cmd, &mut before_block)
                }
                Err(e @ Error::Proto(_)) => (Reply::Error(e), Flow::Close),
                Err(e) => (Reply::Error(e), Flow::Continue),
            };
            if out.failed {
                // A FETCH confirmed earlier replies before blocking and the
                // storage failed: its error is sent; nothing else may follow.
                return;
            }
            let sent = reply.encode_bounded(&mut buf, bound, &mut |b| out.flush(&mut session, b).is_ok());
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
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => input.truncate(len),
            Ok(0) | Err(_) => return,
            Ok(n) => input.truncate(len + n),
        }
    }
}
