use super::*;
use crate::engine::{JobInfo, Reservation, State, Stats};

const ID: &str = "6f1c2b7e-0a4d-4f3b-9d2e-1a2b3c4d5e6f";

fn cmd(args: &[&str]) -> Result<Command, Error> {
    parse(Frame::Array(args.iter().map(|a| Frame::Bulk(a.as_bytes().to_vec())).collect()))
}

fn err_line(args: &[&str]) -> String {
    cmd(args).unwrap_err().reply_line()
}

fn id() -> JobId {
    JobId::parse(ID.as_bytes()).unwrap()
}

#[test]
fn names_are_case_insensitive() {
    assert_eq!(cmd(&["ping"]).unwrap(), Command::Ping(None));
    assert_eq!(cmd(&["PiNg", "hi"]).unwrap(), Command::Ping(Some(b"hi".to_vec())));
    assert_eq!(cmd(&["get", ID]).unwrap(), Command::Get(id()));
    assert_eq!(cmd(&["info", "server"]).unwrap(), Command::Stats);
    assert_eq!(cmd(&["client", "setinfo", "lib-name", "redis-rs"]).unwrap(), Command::Client);
    assert_eq!(cmd(&["select", "0"]).unwrap(), Command::Select);
}

#[test]
fn push_variants() {
    assert_eq!(
        cmd(&["PUSH", "7", ID, "body"]).unwrap(),
        Command::Push { channel: 7, id: id(), payload: Payload::from(&b"body"[..]), due: None }
    );
    assert_eq!(
        cmd(&["PUSH", "7", ID, "body", "at", "123"]).unwrap(),
        Command::Push { channel: 7, id: id(), payload: Payload::from(&b"body"[..]), due: Some(Due::At(123)) }
    );
    assert_eq!(
        cmd(&["PUSH", "7", ID, "body", "in", "3000"]).unwrap(),
        Command::Push { channel: 7, id: id(), payload: Payload::from(&b"body"[..]), due: Some(Due::In(3000)) }
    );
    assert_eq!(Due::In(3000).at(1_000_000), 1_003_000, "a delay counts from the server's now");
    assert_eq!(Due::At(123).at(1_000_000), 123);
    // Uppercase ids are accepted and canonicalised.
    let upper = ID.to_ascii_uppercase();
    assert!(matches!(cmd(&["PUSH", "1", &upper, "x"]).unwrap(), Command::Push { id: i, .. } if i == id()));
    assert!(err_line(&["PUSH", "1", ID, "x", "WHEN", "5"]).starts_with("ERR expected AT or IN"));
    assert!(err_line(&["PUSH", "1", ID, "x", "AT"]).starts_with("ERR wrong number of arguments"));
}

#[test]
fn pushmany_and_ackmany_need_pairs() {
    let other = "00000000-0000-0000-0000-000000000001";
    match cmd(&["PUSHMANY", "1", "0", ID, "a", other, "b"]).unwrap() {
        Command::PushMany { channel: 1, due: Due::At(0), jobs } => assert_eq!(jobs.len(), 2),
        c => panic!("{c:?}"),
    }
    match cmd(&["PUSHMANY", "1", "IN", "2500", ID, "a"]).unwrap() {
        Command::PushMany { channel: 1, due: Due::In(2500), jobs } => assert_eq!(jobs.len(), 1),
        c => panic!("{c:?}"),
    }
    assert!(err_line(&["PUSHMANY", "1", "soon", ID, "a"]).starts_with("ERR due_ms must be an integer"));
    assert!(err_line(&["PUSHMANY", "1", "IN", ID, "a"]).starts_with("ERR delay_ms must be an integer"));
    assert!(err_line(&["PUSHMANY", "1", "0", ID]).starts_with("ERR wrong number"));
    assert!(err_line(&["PUSHMANY", "1", "0"]).starts_with("ERR wrong number"));
    assert_eq!(cmd(&["ACKMANY", ID, "3", other, "4"]).unwrap(), Command::AckMany(vec![(id(), 3), (JobId(1), 4)]));
    assert!(err_line(&["ACKMANY", ID]).starts_with("ERR wrong number"));
}

#[test]
fn fetch_parsing() {
    assert_eq!(
        cmd(&["FETCH", "10", "0", "500", "3", "1"]).unwrap(),
        Command::Fetch { count: 10, lease_ms: 0, block_ms: 500, channels: vec![3, 1] }
    );
    assert!(err_line(&["FETCH", "10", "0", "0"]).starts_with("ERR wrong number"));
    assert!(err_line(&["FETCH", "0", "0", "0", "1"]).starts_with("ERR count must be at least 1"));
    assert!(err_line(&["FETCH", "1", "0", "0", "4294967296"]).starts_with("ERR channel_id must be"));
}

#[test]
fn arity_and_type_errors() {
    assert_eq!(err_line(&["ACK", ID]), "ERR wrong number of arguments for 'ack'");
    assert_eq!(err_line(&["GET", ID, "extra"]), "ERR wrong number of arguments for 'get'");
    assert!(err_line(&["ACK", ID, "-1"]).starts_with("ERR fence must be an integer"));
    assert!(err_line(&["ACK", ID, "1.5"]).starts_with("ERR fence must be an integer"));
    assert!(err_line(&["RETRY", ID, "1", "soon"]).starts_with("ERR delay_ms must be an integer"));
    assert_eq!(err_line(&["GET", "not-a-uuid"]), "ERR invalid job id 'not-a-uuid'");
    assert!(err_line(&["GET", "6f1c2b7e0a4d4f3b9d2e1a2b3c4d5e6f"]).starts_with("ERR invalid job id"));
    assert_eq!(err_line(&["SELECT", "1"]), "ERR only database 0 exists");
    assert_eq!(err_line(&["FLUSHALL"]), "UNKNOWN unknown command FLUSHALL");
    assert_eq!(err_line(&["PING", "a", "b"]), "ERR wrong number of arguments for 'ping'");
    assert_eq!(err_line(&[]), "ERR empty command");
}

#[test]
fn non_bulk_requests_are_protocol_errors() {
    let e = parse(Frame::Array(vec![Frame::Integer(1)])).unwrap_err();
    assert_eq!(e.code(), "PROTO");
    assert_eq!(parse(Frame::Simple(b"PING".to_vec())).unwrap_err().code(), "PROTO");
}

#[test]
fn fail_reason_is_optional_and_dead_count_defaults() {
    assert!(
        matches!(cmd(&["FAIL", ID, "9"]).unwrap(), Command::Fail { fence: 9, ref reason, .. } if reason.is_empty())
    );
    assert!(
        matches!(cmd(&["FAIL", ID, "9", "boom"]).unwrap(), Command::Fail { ref reason, .. } if &**reason == b"boom")
    );
    assert_eq!(cmd(&["DEAD"]).unwrap(), Command::Dead(DEFAULT_DEAD_COUNT));
    assert_eq!(cmd(&["dead", "5"]).unwrap(), Command::Dead(5));
}

#[test]
fn only_handshake_commands_skip_auth() {
    for (args, allowed) in [
        (&["AUTH", "x"][..], true),
        (&["PING"], true),
        (&["CLIENT", "SETNAME", "n"], true),
        (&["SELECT", "0"], true),
        (&["QUIT"], true),
        (&["STATS"], false),
        (&["GET", ID], false),
    ] {
        assert_eq!(cmd(args).unwrap().allowed_without_auth(), allowed, "{args:?}");
    }
}

#[test]
fn replies_encode_as_documented() {
    let mut out = Vec::new();
    Reply::Reservations(vec![Reservation {
        id: id(),
        channel: 2,
        fence: 9,
        attempts: 1,
        payload: Payload::from(&b"p"[..]),
    }])
    .encode(&mut out);
    let expected = format!("*1\r\n*5\r\n$36\r\n{ID}\r\n:2\r\n:9\r\n:1\r\n$1\r\np\r\n");
    assert_eq!(String::from_utf8(out).unwrap(), expected);

    let mut out = Vec::new();
    Reply::Job(JobInfo {
        id: id(),
        channel: 1,
        state: State::Scheduled,
        attempts: 0,
        payload: Payload::from(&b""[..]),
        due_ms: Some(5),
    })
    .encode(&mut out);
    let expected = format!("*6\r\n$36\r\n{ID}\r\n:1\r\n$9\r\nscheduled\r\n:0\r\n$0\r\n\r\n:5\r\n");
    assert_eq!(String::from_utf8(out).unwrap(), expected);

    let mut out = Vec::new();
    Reply::Error(Error::Stale { id: id(), fence: 4 }).encode(&mut out);
    assert_eq!(String::from_utf8(out).unwrap(), format!("-STALE fence 4 is not the current reservation of {ID}\r\n"));
}

#[test]
fn release_and_releasemany_parsing() {
    let other = "00000000-0000-0000-0000-000000000001";
    assert_eq!(cmd(&["RELEASE", ID, "12"]).unwrap(), Command::Release { id: id(), fence: 12 });
    assert_eq!(cmd(&["release", ID, "0"]).unwrap(), Command::Release { id: id(), fence: 0 });
    assert_eq!(err_line(&["RELEASE", ID]), "ERR wrong number of arguments for 'release'");
    assert_eq!(err_line(&["RELEASE", ID, "1", "0"]), "ERR wrong number of arguments for 'release'");
    assert!(err_line(&["RELEASE", ID, "-1"]).starts_with("ERR fence must be an integer"));
    assert_eq!(err_line(&["RELEASE", "nope", "1"]), "ERR invalid job id 'nope'");
    assert_eq!(
        cmd(&["ReleaseMany", ID, "3", other, "4"]).unwrap(),
        Command::ReleaseMany(vec![(id(), 3), (JobId(1), 4)])
    );
    assert_eq!(err_line(&["RELEASEMANY"]), "ERR wrong number of arguments for 'releasemany'");
    assert_eq!(err_line(&["RELEASEMANY", ID, "1", other]), "ERR wrong number of arguments for 'releasemany'");
    assert!(err_line(&["RELEASEMANY", ID, "x"]).starts_with("ERR fence must be an integer"));
    assert!(!cmd(&["RELEASE", ID, "1"]).unwrap().allowed_without_auth());
}

#[test]
fn stats_text_lists_released_total() {
    let stats = Stats { released_total: 7, retried_total: 2, ..Stats::default() };
    let text =
        String::from_utf8(stats_text(&stats, 1, 4, "memory", 0, CompactionStats { total: 3, running: true })).unwrap();
    assert!(text.split("\r\n").any(|l| l == "released_total:7"), "{text}");
    assert!(text.split("\r\n").any(|l| l == "blocked_fetches:4"), "{text}");
    assert!(text.split("\r\n").any(|l| l == "compactions_total:3"), "{text}");
    assert!(text.split("\r\n").any(|l| l == "compacting:1"), "{text}");
    assert!(text.split("\r\n").any(|l| l == "retried_total:2"), "{text}");
}

#[test]
fn node_and_nodes_parsing() {
    assert_eq!(
        cmd(&["NODE", "n-1", "15000", "{}"]).unwrap(),
        Command::Node { node_id: b"n-1".to_vec(), ttl_ms: 15_000, description: b"{}".to_vec() }
    );
    assert_eq!(cmd(&["nodes"]).unwrap(), Command::Nodes);
    assert!(err_line(&["NODE", "a b", "1", "{}"]).starts_with("ERR invalid node id"));
    assert!(err_line(&["NODE", "n", "86400001", "{}"]).starts_with("ERR ttl_ms must be"));
    assert!(err_line(&["NODE", "n", "1"]).starts_with("ERR wrong number"));
    assert!(err_line(&["NODES", "x"]).starts_with("ERR wrong number"));
    assert!(!cmd(&["NODES"]).unwrap().allowed_without_auth());

    let mut out = Vec::new();
    Reply::Nodes(vec![crate::presence::NodeEntry {
        node_id: b"n".to_vec(),
        age_ms: 3,
        ttl_ms: 9,
        description: b"{}".to_vec(),
    }])
    .encode(&mut out);
    assert_eq!(String::from_utf8(out).unwrap(), "*1\r\n*4\r\n$1\r\nn\r\n:3\r\n:9\r\n$2\r\n{}\r\n");
}

#[test]
fn channels_parsing_and_reply() {
    assert_eq!(cmd(&["CHANNELS"]).unwrap(), Command::Channels(vec![]));
    assert_eq!(cmd(&["channels", "7", "3"]).unwrap(), Command::Channels(vec![7, 3]));
    assert!(err_line(&["CHANNELS", "x"]).starts_with("ERR"));
    assert!(!cmd(&["CHANNELS"]).unwrap().allowed_without_auth());

    let counts = crate::engine::ChannelCounts { ready: 2, scheduled: 1, reserved: 0, dead: 4 };
    let job = id();
    let mut out = Vec::new();
    Reply::Channels(vec![
        crate::engine::ChannelInfo { channel: 7, counts, oldest_ready: Some(job) },
        crate::engine::ChannelInfo { channel: 9, counts: Default::default(), oldest_ready: None },
    ])
    .encode(&mut out);
    let job = String::from_utf8(job.encode().to_vec()).unwrap();
    let expected = format!(
        "*2\r\n*6\r\n:7\r\n:2\r\n:1\r\n:0\r\n:4\r\n$36\r\n{job}\r\n*6\r\n:9\r\n:0\r\n:0\r\n:0\r\n:0\r\n$0\r\n\r\n"
    );
    assert_eq!(String::from_utf8(out).unwrap(), expected);
}

/// Issue 18 item 1: a list reply is handed out in pieces of about `bound`
/// bytes (never more than `bound` plus one element), and the pieces are
/// exactly the whole encoding; a failing drain stops the encoding.
#[test]
fn list_replies_stream_in_bounded_pieces() {
    let payload: crate::engine::Payload = vec![b'x'; 10_000].into();
    let list: Vec<Reservation> = (0..50)
        .map(|n| Reservation { id: id(), channel: 1, fence: n, attempts: 1, payload: payload.clone() })
        .collect();
    let reply = Reply::Reservations(list);
    let mut whole = Vec::new();
    reply.encode(&mut whole);
    let (mut pieces, mut largest, mut streamed) = (0, 0, Vec::new());
    let mut buf = Vec::new();
    let done = reply.encode_bounded(&mut buf, 25_000, &mut |b| {
        pieces += 1;
        largest = largest.max(b.len());
        streamed.extend_from_slice(b);
        b.clear();
        true
    });
    assert!(done);
    assert!(buf.len() < 25_000, "what is left under the bound waits for the batch's write");
    streamed.extend_from_slice(&buf);
    assert_eq!(streamed, whole);
    assert!(pieces >= 15, "{pieces} pieces");
    assert!(largest < 25_000 + 10_100, "{largest}");
    let mut calls = 0;
    let mut buf = Vec::new();
    assert!(!reply.encode_bounded(&mut buf, 25_000, &mut |_| {
        calls += 1;
        false
    }));
    assert_eq!(calls, 1, "nothing more is encoded once the drain failed");
}
