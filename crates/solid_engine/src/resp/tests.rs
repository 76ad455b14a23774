use super::*;

fn reply(input: &[u8]) -> Result<Option<(Frame, usize)>, Error> {
    parse_frame(input, Mode::Reply)
}

fn bulk(s: &str) -> Frame {
    Frame::Bulk(s.as_bytes().to_vec())
}

#[test]
fn parses_every_frame_type() {
    let cases: Vec<(&[u8], Frame)> = vec![
        (b"+OK\r\n", Frame::Simple(b"OK".to_vec())),
        (b"-ERR bad\r\n", Frame::Error(b"ERR bad".to_vec())),
        (b":42\r\n", Frame::Integer(42)),
        (b":-9223372036854775808\r\n", Frame::Integer(i64::MIN)),
        (b"$5\r\nhello\r\n", bulk("hello")),
        (b"$0\r\n\r\n", bulk("")),
        (b"$-1\r\n", Frame::Null),
        (b"*-1\r\n", Frame::NullArray),
        (b"*0\r\n", Frame::Array(vec![])),
        (
            b"*3\r\n:1\r\n*1\r\n$1\r\nx\r\n$-1\r\n",
            Frame::Array(vec![Frame::Integer(1), Frame::Array(vec![bulk("x")]), Frame::Null]),
        ),
    ];
    for (input, expected) in cases {
        let (frame, used) = reply(input).unwrap().expect("complete");
        assert_eq!(frame, expected, "{:?}", String::from_utf8_lossy(input));
        assert_eq!(used, input.len());
        assert_eq!(frame.to_bytes(), input, "round trip");
    }
}

#[test]
fn binary_bulk_keeps_crlf_inside() {
    let (frame, _) = reply(b"$4\r\n\r\n\r\n\r\n").unwrap().unwrap();
    assert_eq!(frame, Frame::Bulk(b"\r\n\r\n".to_vec()));
}

#[test]
fn every_strict_prefix_needs_more() {
    let input = b"*3\r\n$4\r\nPUSH\r\n:17\r\n$11\r\nhello world\r\n";
    for cut in 0..input.len() {
        assert_eq!(reply(&input[..cut]).unwrap(), None, "prefix of {cut} bytes");
    }
    assert!(reply(input).unwrap().is_some());
}

#[test]
fn decoder_is_incremental_byte_by_byte() {
    let input = b"*2\r\n$4\r\nPING\r\n$3\r\nabc\r\n+OK\r\n";
    let mut decoder = Decoder::new(Mode::Reply);
    let mut buf = Vec::new();
    let mut frames = Vec::new();
    for &byte in input.iter() {
        buf.push(byte);
        let (used, frame) = decoder.decode(&buf).unwrap();
        buf.drain(..used);
        frames.extend(frame);
    }
    assert_eq!(frames, vec![Frame::Array(vec![bulk("PING"), bulk("abc")]), Frame::Simple(b"OK".to_vec())]);
    assert!(buf.is_empty());
}

#[test]
fn decoder_consumes_finished_array_elements() {
    let mut decoder = Decoder::new(Mode::Request);
    let (used, frame) = decoder.decode(b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$5\r\nhel").unwrap();
    assert_eq!(frame, None);
    // Header and the two finished elements are consumed; the partial one is not.
    assert_eq!(used, b"*3\r\n$1\r\na\r\n$1\r\nb\r\n".len());
    let (used, frame) = decoder.decode(b"$5\r\nhello\r\n").unwrap();
    assert_eq!(used, 11);
    assert_eq!(frame, Some(Frame::Array(vec![bulk("a"), bulk("b"), bulk("hello")])));
}

#[test]
fn inline_commands() {
    let (frame, used) = parse_frame(b"PING\r\n", Mode::Request).unwrap().unwrap();
    assert_eq!(frame, Frame::Array(vec![bulk("PING")]));
    assert_eq!(used, 6);
    let (frame, _) = parse_frame(b"  get \t abc  \n", Mode::Request).unwrap().unwrap();
    assert_eq!(frame, Frame::Array(vec![bulk("get"), bulk("abc")]));
    assert_eq!(parse_frame(b"PING", Mode::Request).unwrap(), None);
    // Empty lines are skipped, the next command is returned.
    let (frame, used) = parse_frame(b"\r\n\r\nPING\r\n", Mode::Request).unwrap().unwrap();
    assert_eq!(frame, Frame::Array(vec![bulk("PING")]));
    assert_eq!(used, 10);
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    let bad: Vec<&[u8]> = vec![
        b"?what\r\n",
        b":12a\r\n",
        b":\r\n",
        b":99999999999999999999\r\n",
        b"$-2\r\n",
        b"$3\r\nabcd\r\n",
        b"$99999999999\r\n",
        b"*-5\r\n",
        b"*99999999\r\n",
        b"+OK\n",
        b"$1x\r\n",
    ];
    for input in bad {
        assert!(reply(input).is_err(), "{:?}", String::from_utf8_lossy(input));
    }
    // An overlong header line is refused before it is complete.
    assert!(reply(&[b':'; 100]).is_err());
    let long = vec![b'A'; MAX_LINE_LEN + 10];
    assert!(parse_frame(&long, Mode::Request).is_err());
}

#[test]
fn nesting_is_bounded() {
    let deep = b"*1\r\n".repeat(MAX_DEPTH + 1);
    assert!(reply(&deep).is_err());
    let ok = b"*1\r\n".repeat(MAX_DEPTH - 1);
    assert_eq!(reply(&ok).unwrap(), None);
}

#[test]
fn request_mode_inside_array_is_strict() {
    // Inside an array only typed elements are allowed.
    assert!(parse_frame(b"*1\r\nPING\r\n", Mode::Request).is_err());
}

#[test]
fn encoder_helpers() {
    let mut out = Vec::new();
    write_command(&mut out, &["PUSH", "1"]);
    write_int(&mut out, -5);
    write_simple(&mut out, "OK");
    write_error(&mut out, "ERR x");
    assert_eq!(out, b"*2\r\n$4\r\nPUSH\r\n$1\r\n1\r\n:-5\r\n+OK\r\n-ERR x\r\n");
}
