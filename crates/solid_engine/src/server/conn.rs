//! One client connection: read, decode, execute, confirm, reply.
//!
//! Pipelining is batched: every complete request already received is
//! executed, their replies collect in one buffer, the log is confirmed once
//! for the whole batch (one write / one group-commit fsync), then the
//! replies go out in one write. Replies are never sent before the changes
//! they confirm are as durable as the mode promises.

use std::io::{Read, Write};

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
pub(crate) fn serve(shared: &Shared, stream: Stream) {
    let Ok(mut reader) = stream.try_clone() else { return };
    let mut out = Output { shared, stream, buf: Vec::with_capacity(16 << 10), failed: false };
    let mut session = Session::new(shared.config.password.is_none());
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
            let (reply, flow) = match command::parse(frame) {
                Ok(cmd) => {
                    let mut before_block = |s: &mut Session| {
                        let _ = out.flush(s);
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
            reply.encode(&mut out.buf);
            if let Flow::Close = flow {
                let _ = out.flush(&mut session);
                return;
            }
        }
        if out.flush(&mut session).is_err() {
            return;
        }
        // Drop consumed input; keep the partial request.
        input.drain(..start);
        start = 0;
        let len = input.len();
        input.resize(len + READ_CHUNK, 0);
        match reader.read(&mut input[len..]) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => input.truncate(len),
            Ok(0) | Err(_) => return,
            Ok(n) => input.truncate(len + n),
        }
    }
}
