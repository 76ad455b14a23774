//! RESP2 framing: an incremental decoder and the encoder.
//!
//! Guarantees:
//! - The decoder never panics and never allocates more than the input
//!   justifies: lengths are checked against fixed limits before anything is
//!   reserved, nesting is bounded, and no recursion is used while decoding.
//! - Decoding is incremental and linear: [`Decoder::decode`] consumes every
//!   *complete element* it finds and keeps partially built arrays in its own
//!   stack, so a large array arriving in many reads is not re-parsed from the
//!   start each time. Only a scalar element (one bulk string, one line) is
//!   ever re-examined, and only its header.
//! - In request mode any top-level input that does not start with `*` is an
//!   inline command (a line split on spaces), as in Redis, so `nc`/`telnet`
//!   and `redis-cli` work.

use crate::error::Error;

/// Largest bulk string accepted (a job payload travels in one).
pub const MAX_BULK_LEN: usize = 64 << 20;
/// Largest array accepted (PUSHMANY with this many arguments at most).
pub const MAX_ARRAY_LEN: usize = 1 << 20;
/// Longest inline command or simple-string line.
pub const MAX_LINE_LEN: usize = 64 << 10;
/// Deepest array nesting accepted; keeps the recursive `Drop` of a frame shallow.
pub const MAX_DEPTH: usize = 32;

/// Longest header line (`$<len>`, `*<len>`, `:<int>`): type byte, sign, 20 digits.
const MAX_HEADER_LEN: usize = 24;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Vec<u8>),
    /// `$-1`: the nil bulk string.
    Null,
    /// `*-1`: the nil array.
    NullArray,
    Array(Vec<Frame>),
}

/// Whether top-level input that is not an array is an inline command
/// (server side) or must be a typed RESP value (client side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Request,
    Reply,
}

#[derive(Debug)]
pub struct Decoder {
    mode: Mode,
    /// Arrays being filled: elements still missing, elements so far.
    stack: Vec<(usize, Vec<Frame>)>,
    /// Largest bulk string accepted (at most [`MAX_BULK_LEN`]).
    max_bulk: usize,
    /// What the arrays being filled hold: the bytes consumed into them plus
    /// one `Frame` per element, so a request of many tiny elements counts
    /// for the memory it takes, not only for its bytes on the wire.
    held: usize,
}

/// One element: a finished frame or the header of an array to fill.
enum Element {
    Frame(Frame),
    ArrayHeader(usize),
    /// An empty inline line: consumed, produces nothing.
    Nothing,
}

impl Decoder {
    pub fn new(mode: Mode) -> Self {
        Decoder::with_max_bulk(mode, MAX_BULK_LEN)
    }

    /// A decoder that refuses bulk strings longer than `max_bulk` (capped
    /// at [`MAX_BULK_LEN`]) from their header, before their bytes arrive.
    pub fn with_max_bulk(mode: Mode, max_bulk: usize) -> Self {
        Decoder { mode, stack: Vec::new(), max_bulk: max_bulk.min(MAX_BULK_LEN), held: 0 }
    }

    /// Memory held by the request being decoded (see `held`); 0 between
    /// requests. The server caps it with the unconsumed input.
    pub fn held_bytes(&self) -> usize {
        self.held
    }

    /// Decodes from `buf`, which must start right after the bytes consumed by
    /// the previous call. Returns how many bytes were consumed (the caller
    /// drops them) and the frame, if one was completed. `(n, None)` means
    /// "need more input"; `n` may still be non-zero (array progress).
    /// After an error the decoder must not be used again.
    pub fn decode(&mut self, buf: &[u8]) -> Result<(usize, Option<Frame>), Error> {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            let parsed = if self.stack.is_empty() && self.mode == Mode::Request {
                match rest.first() {
                    None => None,
                    Some(b'*') => parse_element(rest, self.max_bulk)?,
                    Some(_) => parse_inline(rest)?,
                }
            } else {
                parse_element(rest, self.max_bulk)?
            };
            let Some((element, used)) = parsed else { return Ok((pos, None)) };
            pos += used;
            if !self.stack.is_empty() || matches!(element, Element::ArrayHeader(n) if n > 0) {
                self.held = self.held.saturating_add(used + std::mem::size_of::<Frame>());
            }
            let mut frame = match element {
                Element::Nothing => continue,
                Element::Frame(f) => f,
                Element::ArrayHeader(0) => Frame::Array(Vec::new()),
                Element::ArrayHeader(len) => {
                    if self.stack.len() >= MAX_DEPTH {
                        return Err(Error::Proto("arrays nested too deeply".into()));
                    }
                    // Capacity is capped: the declared length is not trusted.
                    self.stack.push((len, Vec::with_capacity(len.min(1024))));
                    continue;
                }
            };
            // A frame is complete: fold it into the enclosing arrays.
            loop {
                match self.stack.last_mut() {
                    None => {
                        self.held = 0;
                        return Ok((pos, Some(frame)));
                    }
                    Some((missing, items)) => {
                        items.push(frame);
                        *missing -= 1;
                        if *missing > 0 {
                            break;
                        }
                        let (_, items) = self.stack.pop().expect("non-empty stack");
                        frame = Frame::Array(items);
                    }
                }
            }
        }
    }
}

/// Stateless helper: the first complete frame of `buf` and its length, or
/// `None` when more input is needed.
pub fn parse_frame(buf: &[u8], mode: Mode) -> Result<Option<(Frame, usize)>, Error> {
    let mut decoder = Decoder::new(mode);
    match decoder.decode(buf)? {
        (used, Some(frame)) => Ok(Some((frame, used))),
        (_, None) => Ok(None),
    }
}

/// Finds the CRLF-terminated line at the start of `buf`. `Ok(None)`: not
/// complete yet. A bare LF, or a line longer than `max`, is a protocol error.
fn line(buf: &[u8], max: usize) -> Result<Option<(&[u8], usize)>, Error> {
    let window = &buf[..buf.len().min(max + 2)];
    match window.iter().position(|&b| b == b'\n') {
        Some(i) if i > 0 && buf[i - 1] == b'\r' => Ok(Some((&buf[..i - 1], i + 1))),
        Some(_) => Err(Error::Proto("line not terminated by CRLF".into())),
        None if buf.len() > max + 1 => Err(Error::Proto("line too long".into())),
        None => Ok(None),
    }
}

fn parse_int(digits: &[u8]) -> Result<i64, Error> {
    let bad = || Error::Proto(format!("invalid integer {:?}", String::from_utf8_lossy(digits)));
    let (negative, body) = match digits.split_first() {
        Some((b'-', body)) => (true, body),
        _ => (false, digits),
    };
    if body.is_empty() || body.len() > 19 {
        return Err(bad());
    }
    let mut value: i64 = 0;
    for &d in body {
        if !d.is_ascii_digit() {
            return Err(bad());
        }
        let digit = i64::from(d - b'0');
        value = value
            .checked_mul(10)
            .and_then(|v| if negative { v.checked_sub(digit) } else { v.checked_add(digit) })
            .ok_or_else(bad)?;
    }
    Ok(value)
}

fn parse_element(buf: &[u8], max_bulk: usize) -> Result<Option<(Element, usize)>, Error> {
    let Some(&kind) = buf.first() else { return Ok(None) };
    match kind {
        b'+' | b'-' => {
            let Some((text, used)) = line(buf, MAX_LINE_LEN)? else { return Ok(None) };
            let text = text[1..].to_vec();
            let frame = if kind == b'+' { Frame::Simple(text) } else { Frame::Error(text) };
            Ok(Some((Element::Frame(frame), used)))
        }
        b':' => {
            let Some((text, used)) = line(buf, MAX_HEADER_LEN)? else { return Ok(None) };
            Ok(Some((Element::Frame(Frame::Integer(parse_int(&text[1..])?)), used)))
        }
        b'$' => {
            let Some((text, header)) = line(buf, MAX_HEADER_LEN)? else { return Ok(None) };
            let len = parse_int(&text[1..])?;
            if len == -1 {
                return Ok(Some((Element::Frame(Frame::Null), header)));
            }
            if len < 0 {
                return Err(Error::Proto(format!("invalid bulk length {len}")));
            }
            if len as u64 > max_bulk as u64 {
                return Err(Error::Proto(format!("bulk length {len} over max_payload_bytes ({max_bulk})")));
            }
            let len = len as usize;
            let end = header + len;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(Error::Proto("bulk string not terminated by CRLF".into()));
            }
            Ok(Some((Element::Frame(Frame::Bulk(buf[header..end].to_vec())), end + 2)))
        }
        b'*' => {
            let Some((text, used)) = line(buf, MAX_HEADER_LEN)? else { return Ok(None) };
            let len = parse_int(&text[1..])?;
            if len == -1 {
                return Ok(Some((Element::Frame(Frame::NullArray), used)));
            }
            if len < 0 || len as u64 > MAX_ARRAY_LEN as u64 {
                return Err(Error::Proto(format!("invalid array length {len}")));
            }
            Ok(Some((Element::ArrayHeader(len as usize), used)))
        }
        other => Err(Error::Proto(format!("unexpected byte 0x{other:02x} where a type was expected"))),
    }
}

/// An inline command: one line, arguments separated by spaces or tabs.
fn parse_inline(buf: &[u8]) -> Result<Option<(Element, usize)>, Error> {
    let window = &buf[..buf.len().min(MAX_LINE_LEN + 1)];
    let Some(nl) = window.iter().position(|&b| b == b'\n') else {
        if buf.len() > MAX_LINE_LEN {
            return Err(Error::Proto("inline request too long".into()));
        }
        return Ok(None);
    };
    let text = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    let args: Vec<Frame> = text
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|word| !word.is_empty())
        .map(|word| Frame::Bulk(word.to_vec()))
        .collect();
    let element = if args.is_empty() { Element::Nothing } else { Element::Frame(Frame::Array(args)) };
    Ok(Some((element, nl + 1)))
}

// ---------------------------------------------------------------- encoding

impl Frame {
    /// Appends the RESP2 encoding. Simple strings and errors must not
    /// contain CR LF (the decoder never produces such frames).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Simple(s) => write_line(out, b'+', s),
            Frame::Error(s) => write_line(out, b'-', s),
            Frame::Integer(i) => write_int(out, *i),
            Frame::Bulk(b) => write_bulk(out, b),
            Frame::Null => out.extend_from_slice(b"$-1\r\n"),
            Frame::NullArray => out.extend_from_slice(b"*-1\r\n"),
            Frame::Array(items) => {
                write_array_header(out, items.len());
                for item in items {
                    item.encode(out);
                }
            }
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

fn write_line(out: &mut Vec<u8>, kind: u8, text: &[u8]) {
    out.push(kind);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

/// Decimal digits of `n` without allocating.
fn push_decimal(out: &mut Vec<u8>, n: i64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[i..]);
}

pub fn write_int(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    push_decimal(out, n);
    out.extend_from_slice(b"\r\n");
}

pub fn write_bulk(out: &mut Vec<u8>, data: &[u8]) {
    out.push(b'$');
    push_decimal(out, data.len() as i64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

pub fn write_array_header(out: &mut Vec<u8>, len: usize) {
    out.push(b'*');
    push_decimal(out, len as i64);
    out.extend_from_slice(b"\r\n");
}

pub fn write_simple(out: &mut Vec<u8>, text: &str) {
    write_line(out, b'+', text.as_bytes());
}

pub fn write_error(out: &mut Vec<u8>, line_text: &str) {
    write_line(out, b'-', line_text.as_bytes());
}

/// Encodes a request the way clients do: an array of bulk strings.
pub fn write_command<A: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[A]) {
    write_array_header(out, args.len());
    for arg in args {
        write_bulk(out, arg.as_ref());
    }
}

#[cfg(test)]
mod tests;
