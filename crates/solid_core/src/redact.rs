//! The one redaction rule. Every text a person may read — log lines,
//! exception messages, `inspect` output, the dashboard — passes through
//! [`redact`] before it leaves the process, so a password written into a
//! backend URL or spec never appears in clear. The Ruby side calls the same
//! function (`SolidJobs::Native.redact`), so both languages hide exactly the
//! same things.
//!
//! Hidden: the userinfo of any URL (`redis://user:***@host`, or `***@host`
//! when there is no `:`, since Redis clients read a lone userinfo as the
//! password), and the value after a secret-looking key (`password`,
//! `passwd`, `pass`, `pwd`, `secret`, `token`, alone or as the last word of
//! a key such as `db_password`) followed by `=`, `:` or `=>`, in query
//! strings (`?pass=…`), Ruby and JSON hashes (`:password=>"…"`,
//! `password: "…"`, `"password":"…"`). Redacting twice changes nothing.
//! Hiding too much is harmless; hiding too little is the defect this
//! guards against, so token boundaries are chosen generously.

/// What a secret is replaced with.
pub const MASK: &str = "***";

const SECRET_WORDS: [&str; 6] = ["password", "passwd", "pass", "pwd", "secret", "token"];

/// `text` with every credential it contains replaced by [`MASK`].
pub fn redact(text: &str) -> String {
    redact_key_values(&redact_userinfo(text))
}

/// Ends a URL token: a password may contain `/`, `)` or `,` when written
/// unencoded, so only whitespace, quotes and angle brackets end it.
fn ends_url(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b'"' | b'\'' | b'`' | b'<' | b'>')
}

fn redact_userinfo(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = text[search..].find("://") {
        let start = search + found + 3;
        let mut end = start;
        while end < bytes.len() && !ends_url(bytes[end]) && !text[end..].starts_with("://") {
            end += 1;
        }
        // A later "://" inside the token starts another URL: the authority of
        // this one ends where that URL's scheme begins.
        let token_end = if end < bytes.len() && text[end..].starts_with("://") {
            text[start..end]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
                .map_or(start, |i| start + i + 1)
        } else {
            end
        };
        if let Some(at) = text[start..token_end].rfind('@') {
            let userinfo = &text[start..start + at];
            if !userinfo.is_empty() {
                let masked = match userinfo.find(':') {
                    Some(colon) => format!("{}:{MASK}", &userinfo[..colon]),
                    None => MASK.to_owned(),
                };
                out.push_str(&text[copied..start]);
                out.push_str(&masked);
                copied = start + at;
            }
        }
        search = token_end.max(start);
    }
    out.push_str(&text[copied..]);
    out
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// True when `key` is a secret word or ends in `_word` / `-word` (also
/// what the log masks a field by: `password:`, `auth_token:`).
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|word| {
        key == *word
            || (key.len() > word.len()
                && key.ends_with(word)
                && matches!(key.as_bytes()[key.len() - word.len() - 1], b'_' | b'-'))
    })
}

/// Ends an unquoted value.
fn ends_bare_value(c: u8) -> bool {
    c.is_ascii_whitespace() || matches!(c, b'&' | b'#' | b',' | b';' | b'}' | b')' | b']' | b'"' | b'\'')
}

fn redact_key_values(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !is_key_char(bytes[i]) || (i > 0 && is_key_char(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let key_start = i;
        while i < bytes.len() && is_key_char(bytes[i]) {
            i += 1;
        }
        if !is_secret_key(&text[key_start..i]) {
            continue;
        }
        if let Some((value_start, value_end)) = value_after_key(bytes, i) {
            out.push_str(&text[copied..value_start]);
            out.push_str(MASK);
            copied = value_end;
            i = value_end;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The byte range of the value following a key that ends at `i`: an
/// optional closing quote of the key, spaces, `=>`, `:` or `=`, spaces, then
/// a quoted or bare value. None when no separator follows (a plain word).
fn value_after_key(bytes: &[u8], mut i: usize) -> Option<(usize, usize)> {
    if i < bytes.len() && matches!(bytes[i], b'"' | b'\'') {
        i += 1;
    }
    while i < bytes.len() && bytes[i] == b' ' {
        i += 1;
    }
    if bytes[i..].starts_with(b"=>") {
        i += 2;
    } else if i < bytes.len() && matches!(bytes[i], b':' | b'=') {
        i += 1;
    } else {
        return None;
    }
    while i < bytes.len() && bytes[i] == b' ' {
        i += 1;
    }
    if i >= bytes.len() {
        return None;
    }
    if matches!(bytes[i], b'"' | b'\'') {
        let quote = bytes[i];
        let start = i + 1;
        let mut end = start;
        while end < bytes.len() && bytes[end] != quote {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        let end = end.min(bytes.len());
        return (end > start).then_some((start, end));
    }
    let start = i;
    let mut end = start;
    while end < bytes.len() && !ends_bare_value(bytes[end]) {
        end += 1;
    }
    (end > start).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_userinfo_is_masked_keeping_the_user_name() {
        assert_eq!(redact("redis://:hunter2@127.0.0.1:6379/0"), "redis://:***@127.0.0.1:6379/0");
        assert_eq!(redact("rediss://default:hunter2@cache:6380"), "rediss://default:***@cache:6380");
        assert_eq!(redact("redis://hunter2@cache"), "redis://***@cache", "a lone userinfo is the password");
        assert_eq!(
            redact("Connection refused (os error 111) (redis://:s3cr/t)x@10.0.0.1:1/0)"),
            "Connection refused (os error 111) (redis://:***@10.0.0.1:1/0)"
        );
        assert_eq!(
            redact("redis://127.0.0.1:6379/0 and unix:///tmp/r.sock"),
            "redis://127.0.0.1:6379/0 and unix:///tmp/r.sock"
        );
        assert_eq!(
            redact(r#"["redis://:a@h/0", "tcp://u:b@e:1", "x@y"]"#),
            r#"["redis://:***@h/0", "tcp://u:***@e:1", "x@y"]"#
        );
        assert_eq!(redact("redis://:a@h/0redis://:b@g"), "redis://:***@h/0redis://:***@g");
    }

    #[test]
    fn values_of_secret_keys_are_masked() {
        assert_eq!(redact("redis+unix:///tmp/e.sock?pass=p%20w&db=1"), "redis+unix:///tmp/e.sock?pass=***&db=1");
        assert_eq!(redact(r#"{:url=>"tcp://e:1", :password=>"s3"}"#), r#"{:url=>"tcp://e:1", :password=>"***"}"#);
        assert_eq!(redact(r#"{url: "tcp://e:1", password: "s3"}"#), r#"{url: "tcp://e:1", password: "***"}"#);
        assert_eq!(redact(r#"{"db_password":"s\"3","n":1}"#), r#"{"db_password":"***","n":1}"#);
        assert_eq!(redact("TOKEN=abc secret: xyz"), "TOKEN=*** secret: ***");
        assert_eq!(redact("bypass=1 password reset, token 5 is stale"), "bypass=1 password reset, token 5 is stale");
    }

    #[test]
    fn redacting_twice_changes_nothing() {
        for text in ["redis://:hunter2@h/0", "redis://u:p@h?password=q", r#"{:password=>"s"}"#, "x@y://"] {
            let once = redact(text);
            assert_eq!(redact(&once), once, "{text}");
        }
    }
}
