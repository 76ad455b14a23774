//! The one error type of the crate.
//!
//! Every failure a client can see is a variant here, and [`Error::code`] is
//! the single place that maps a variant to its protocol error code, so the
//! codes listed in `docs/protocol.md` cannot drift between call sites.
//! Variants that never reach a client (configuration, I/O, corruption) map
//! to `ERR` should one ever be sent.

use std::fmt;

use crate::id::JobId;

#[derive(Debug)]
pub enum Error {
    /// The byte stream is not valid RESP; the connection is closed after the reply.
    Proto(String),
    /// Wrong arity, bad integer, invalid job id and other request errors.
    Invalid(String),
    /// The command name is not known; the connection stays open.
    UnknownCommand(String),
    /// A password is configured and the connection has not authenticated.
    NoAuth,
    /// AUTH with the wrong password.
    WrongPass,
    /// The fence is not the current reservation of the job.
    Stale {
        id: JobId,
        fence: u64,
    },
    /// No job with this id is retained.
    NotFound(JobId),
    /// The job is reserved, so it cannot be cancelled.
    Busy(JobId),
    /// The connection limit is reached; the new connection is closed.
    MaxConn(usize),
    /// Every slot for connections still in their handshake is taken by one
    /// that cannot be closed early (a failed AUTH serving its delay).
    MaxUnauthenticated(usize),
    /// HELLO asked for a protocol version other than 2 or 3.
    NoProto,
    /// An HTTP request line or header reached the RESP port: the connection
    /// is closed without a reply, as Redis does, so that a browser or curl
    /// cannot smuggle commands in a request body.
    CrossProtocol,
    /// The durable log could not be written; the change is not confirmed.
    Storage(String),
    /// A data file is corrupt at a known position (not at the tail).
    Corrupt {
        file: String,
        offset: u64,
        reason: String,
    },
    /// Bad flags or configuration file.
    Config(String),
    Io(std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The protocol error code: the first word of the `-` reply.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Proto(_) => "PROTO",
            Error::Invalid(_) => "ERR",
            Error::UnknownCommand(_) => "UNKNOWN",
            Error::NoAuth => "NOAUTH",
            Error::WrongPass => "WRONGPASS",
            Error::Stale { .. } => "STALE",
            Error::NotFound(_) => "NOTFOUND",
            Error::Busy(_) => "BUSY",
            Error::MaxConn(_) | Error::MaxUnauthenticated(_) => "MAXCONN",
            Error::NoProto => "NOPROTO",
            Error::CrossProtocol => "PROTO",
            Error::Storage(_) | Error::Corrupt { .. } | Error::Config(_) | Error::Io(_) => "ERR",
        }
    }

    /// The text after the code in the `-` reply. Never contains CR or LF,
    /// so it is always a valid RESP simple error.
    pub fn message(&self) -> String {
        let text = match self {
            Error::Proto(r) | Error::Invalid(r) => r.clone(),
            Error::UnknownCommand(name) => format!("unknown command {name}"),
            Error::NoAuth => "authentication required".into(),
            Error::WrongPass => "invalid password".into(),
            Error::Stale { id, fence } => {
                format!("fence {fence} is not the current reservation of {id}")
            }
            Error::NotFound(id) => format!("no job {id}"),
            Error::Busy(id) => format!("job {id} is reserved"),
            Error::MaxConn(max) => format!("max number of connections ({max}) reached"),
            Error::MaxUnauthenticated(max) => format!("max number of unauthenticated connections ({max}) reached"),
            Error::NoProto => "unsupported protocol version".into(),
            Error::CrossProtocol => "HTTP request on the RESP port".into(),
            Error::Storage(r) => format!("storage failure: {r}"),
            Error::Corrupt { file, offset, reason } => {
                format!("corrupt record in {file} at offset {offset}: {reason}")
            }
            Error::Config(r) => r.clone(),
            Error::Io(e) => format!("io: {e}"),
        };
        text.replace(['\r', '\n'], " ")
    }

    /// The whole reply line without the leading `-` and trailing CRLF.
    pub fn reply_line(&self) -> String {
        format!("{} {}", self.code(), self.message())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reply_line())
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}
