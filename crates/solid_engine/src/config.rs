//! Configuration: command-line flags and an optional TOML file with the
//! same keys. Flags win over the file; the file wins over defaults. Every
//! problem is an `Error::Config` with a message naming the flag or key
//! (the binary exits 2 on it).

use std::path::PathBuf;

use serde::Deserialize;

use crate::engine::EngineConfig;
use crate::error::{Error, Result};
use crate::storage::Durability;

pub const DEFAULT_LISTEN: &str = "tcp://127.0.0.1:7777";
/// The environment variable the password may come from (kept off the
/// command line, which any local user can read in /proc/<pid>/cmdline).
pub const PASSWORD_ENV: &str = "SOLID_ENGINE_PASSWORD";

/// The password: never printed. `Debug` is redacted, so a configuration
/// dumped into a log or an error message cannot carry it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl std::ops::Deref for Secret {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(text: &str) -> Secret {
        Secret(text.to_string())
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Secret {
        Secret(text)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// `host:port`, host defaulting to 127.0.0.1.
    Tcp(String),
    Unix(PathBuf),
}

impl ListenAddr {
    /// `tcp://[HOST]:PORT`, `tcp://PORT` or `unix://PATH`.
    pub fn parse(text: &str) -> Result<ListenAddr> {
        let bad = |why: &str| Error::Config(format!("invalid listen address '{text}': {why}"));
        if let Some(path) = text.strip_prefix("unix://") {
            if path.is_empty() {
                return Err(bad("empty socket path"));
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        let Some(rest) = text.strip_prefix("tcp://") else {
            return Err(bad("expected tcp://HOST:PORT or unix://PATH"));
        };
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) => (host, port),
            None => ("", rest),
        };
        if port.parse::<u16>().is_err() {
            return Err(bad("bad port"));
        }
        let host = if host.is_empty() { "127.0.0.1" } else { host };
        Ok(ListenAddr::Tcp(format!("{host}:{port}")))
    }

    /// Whether only this host can reach the address: a Unix socket (mode
    /// 0600), `localhost`, or a loopback IP. A host name is not resolved
    /// here: any other name counts as public.
    pub fn is_local(&self) -> bool {
        let ListenAddr::Tcp(host_port) = self else { return true };
        let host = host_port.rsplit_once(':').map_or(host_port.as_str(), |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => write!(f, "tcp://{addr}"),
            ListenAddr::Unix(path) => write!(f, "unix://{}", path.display()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub listen: Vec<ListenAddr>,
    pub durability: Durability,
    pub data_dir: Option<PathBuf>,
    pub lease_ms: u64,
    pub password: Option<Secret>,
    /// Allows a public listen address without a password.
    pub insecure: bool,
    /// Authenticated connections (or, without a password, connections past
    /// their first request).
    pub max_connections: usize,
    /// Connections still in their handshake: not yet authenticated (or,
    /// without a password, no complete request yet). Counted apart from
    /// `max_connections`, so they can never lock an authenticated client out.
    pub max_unauthenticated: usize,
    /// How long a connection may stay in its handshake before it is closed.
    pub handshake_timeout_ms: u64,
    /// How long an authenticated connection may send nothing before it is
    /// closed; 0 = never (pooled worker connections idle legitimately).
    pub idle_timeout_ms: u64,
    /// How long a wrong password waits for its reply (the connection is then
    /// closed).
    pub auth_failure_delay_ms: u64,
    pub completed_retention_ms: u64,
    pub dead_max: usize,
    pub compact_threshold_bytes: u64,
    /// Largest bulk string (job payload, FAIL reason) a request may carry.
    pub max_payload_bytes: usize,
    /// Most input one connection may have received and not yet executed:
    /// the request being read, plus requests pipelined behind it.
    pub max_request_bytes: usize,
    /// Unsent replies a connection may have before the server writes them
    /// out and stops reading that connection until they are taken.
    pub output_buffer_bytes: usize,
}

/// Defaults of the per-connection memory limits (docs/reliability.md).
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = crate::resp::MAX_BULK_LEN;
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 128 << 20;
pub const DEFAULT_OUTPUT_BUFFER_BYTES: usize = 1 << 20;

impl Default for Config {
    fn default() -> Self {
        let engine = EngineConfig::default();
        Config {
            listen: vec![ListenAddr::parse(DEFAULT_LISTEN).expect("valid default")],
            durability: Durability::Memory,
            data_dir: None,
            lease_ms: engine.lease_ms,
            password: None,
            insecure: false,
            max_connections: 1024,
            max_unauthenticated: 64,
            handshake_timeout_ms: 10_000,
            idle_timeout_ms: 0,
            auth_failure_delay_ms: 200,
            completed_retention_ms: engine.completed_retention_ms,
            dead_max: engine.dead_max,
            compact_threshold_bytes: 64 << 20,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            output_buffer_bytes: DEFAULT_OUTPUT_BUFFER_BYTES,
        }
    }
}

impl Config {
    pub fn engine(&self) -> EngineConfig {
        EngineConfig {
            lease_ms: self.lease_ms,
            completed_retention_ms: self.completed_retention_ms,
            dead_max: self.dead_max,
        }
    }

    /// Checks rules that involve several keys.
    pub fn validate(&self) -> Result<()> {
        if self.durability != Durability::Memory && self.data_dir.is_none() {
            return Err(Error::Config(format!("durability {} requires data_dir", self.durability.name())));
        }
        if self.lease_ms == 0 {
            return Err(Error::Config("lease_ms must be at least 1".into()));
        }
        if self.max_connections == 0 {
            return Err(Error::Config("max_connections must be at least 1".into()));
        }
        if self.max_payload_bytes == 0 || self.max_payload_bytes > crate::resp::MAX_BULK_LEN {
            return Err(Error::Config(format!("max_payload_bytes must be 1..={}", crate::resp::MAX_BULK_LEN)));
        }
        // A request carrying one payload at the cap must fit.
        if self.max_request_bytes < self.max_payload_bytes.saturating_add(1024) {
            return Err(Error::Config("max_request_bytes must be at least max_payload_bytes + 1024".into()));
        }
        if self.output_buffer_bytes == 0 {
            return Err(Error::Config("output_buffer_bytes must be at least 1".into()));
        }
        if self.listen.is_empty() {
            return Err(Error::Config("at least one listen address is required".into()));
        }
        if self.max_unauthenticated == 0 {
            return Err(Error::Config("max_unauthenticated must be at least 1".into()));
        }
        if self.handshake_timeout_ms == 0 {
            return Err(Error::Config("handshake_timeout_ms must be at least 1".into()));
        }
        if self.password.is_none() && !self.insecure {
            if let Some(public) = self.listen.iter().find(|l| !l.is_local()) {
                return Err(Error::Config(format!(
                    "refusing to listen on {public} without a password: set one with --password-file or \
                     {PASSWORD_ENV} (or listen on 127.0.0.1 / a Unix socket), or pass --insecure"
                )));
            }
        }
        Ok(())
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Cli {
    Run(Config),
    /// `--repair`: cut the data directory's log at its first bad record
    /// (after confirmation on stdin, or at once with `--yes`), then exit.
    Repair {
        data_dir: PathBuf,
        yes: bool,
    },
    Help,
    Version,
}

pub const USAGE: &str = "\
solid-engine-server: the SolidJobs job server

USAGE: solid-engine-server [OPTIONS]

OPTIONS:
  --listen ADDR                  tcp://[HOST:]PORT or unix://PATH; repeatable
                                 (default tcp://127.0.0.1:7777)
  --durability MODE              memory (default), balanced or strict
  --data-dir DIR                 required for balanced and strict
  --lease-ms MS                  default lease for FETCH (default 30000)
  --password-file FILE           require AUTH with the password in FILE (one
                                 trailing newline is dropped); or set
                                 SOLID_ENGINE_PASSWORD
  --password SECRET              the same, but visible to every local user
                                 in /proc/<pid>/cmdline
  --insecure                     allow a non-loopback --listen without a
                                 password
  --max-connections N            authenticated connections (default 1024)
  --max-unauthenticated N        connections still in their handshake
                                 (default 64; when full, a new one closes
                                 the oldest)
  --handshake-timeout-ms MS      authenticate (or, without a password, send
                                 a first request) within MS (default 10000)
  --idle-timeout-ms MS           close authenticated connections idle this
                                 long (default 0: never)
  --auth-failure-delay-ms MS     a wrong password is answered after MS, then
                                 the connection is closed (default 200)
  --completed-retention-ms MS    keep completed jobs this long (default 60000)
  --dead-max N                   keep this many dead jobs (default 10000)
  --compact-threshold-bytes N    compact the log past this size (default 64 MiB)
  --max-payload-bytes N          largest payload in a request (default 64 MiB)
  --max-request-bytes N          unexecuted input per connection (default 128 MiB)
  --output-buffer-bytes N        unsent replies per connection before the server
                                 stops reading it (default 1 MiB)
  --config FILE                  TOML file with the same keys (flags win)
  --repair                       truncate the log of --data-dir at its first
                                 bad record (asks first), then exit
  --yes                          with --repair: do not ask
  --help, --version
";

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<Vec<String>>,
    durability: Option<String>,
    data_dir: Option<PathBuf>,
    lease_ms: Option<u64>,
    password: Option<String>,
    password_file: Option<PathBuf>,
    insecure: Option<bool>,
    max_connections: Option<usize>,
    max_unauthenticated: Option<usize>,
    handshake_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    auth_failure_delay_ms: Option<u64>,
    completed_retention_ms: Option<u64>,
    dead_max: Option<usize>,
    compact_threshold_bytes: Option<u64>,
    max_payload_bytes: Option<usize>,
    max_request_bytes: Option<usize>,
    output_buffer_bytes: Option<usize>,
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T> {
    value.parse().map_err(|_| Error::Config(format!("{flag}: '{value}' is not a valid number")))
}

fn durability(value: &str, key: &str) -> Result<Durability> {
    Durability::parse(value)
        .ok_or_else(|| Error::Config(format!("{key}: '{value}' is not one of memory, balanced, strict")))
}

/// Parses the process arguments (without the program name).
pub fn from_args<I: IntoIterator<Item = String>>(args: I) -> Result<Cli> {
    let mut flags = FileConfig::default();
    let mut config_file: Option<PathBuf> = None;
    let mut listen: Vec<String> = Vec::new();
    let (mut repair, mut yes) = (false, false);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(Cli::Help),
            "--version" | "-V" => return Ok(Cli::Version),
            "--repair" if inline.is_none() => {
                repair = true;
                continue;
            }
            "--yes" if inline.is_none() => {
                yes = true;
                continue;
            }
            "--insecure" if inline.is_none() => {
                flags.insecure = Some(true);
                continue;
            }
            _ => {}
        }
        let mut value =
            || inline.clone().or_else(|| args.next()).ok_or_else(|| Error::Config(format!("{flag} needs a value")));
        match flag.as_str() {
            "--listen" => listen.push(value()?),
            "--durability" => flags.durability = Some(value()?),
            "--data-dir" => flags.data_dir = Some(PathBuf::from(value()?)),
            "--lease-ms" => flags.lease_ms = Some(number(&flag, &value()?)?),
            "--password" => flags.password = Some(value()?),
            "--password-file" => flags.password_file = Some(PathBuf::from(value()?)),
            "--max-connections" => flags.max_connections = Some(number(&flag, &value()?)?),
            "--max-unauthenticated" => flags.max_unauthenticated = Some(number(&flag, &value()?)?),
            "--handshake-timeout-ms" => flags.handshake_timeout_ms = Some(number(&flag, &value()?)?),
            "--idle-timeout-ms" => flags.idle_timeout_ms = Some(number(&flag, &value()?)?),
            "--auth-failure-delay-ms" => flags.auth_failure_delay_ms = Some(number(&flag, &value()?)?),
            "--completed-retention-ms" => flags.completed_retention_ms = Some(number(&flag, &value()?)?),
            "--dead-max" => flags.dead_max = Some(number(&flag, &value()?)?),
            "--compact-threshold-bytes" => flags.compact_threshold_bytes = Some(number(&flag, &value()?)?),
            "--max-payload-bytes" => flags.max_payload_bytes = Some(number(&flag, &value()?)?),
            "--max-request-bytes" => flags.max_request_bytes = Some(number(&flag, &value()?)?),
            "--output-buffer-bytes" => flags.output_buffer_bytes = Some(number(&flag, &value()?)?),
            "--config" => config_file = Some(PathBuf::from(value()?)),
            other => return Err(Error::Config(format!("unknown option '{other}' (see --help)"))),
        }
    }
    if !listen.is_empty() {
        flags.listen = Some(listen);
    }
    let file = match &config_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::Config(format!("cannot read config file {}: {e}", path.display())))?;
            parse_toml(&text).map_err(|e| Error::Config(format!("config file {}: {e}", path.display())))?
        }
        None => FileConfig::default(),
    };
    let env = std::env::var(PASSWORD_ENV).ok().filter(|p| !p.is_empty());
    let config = merge(flags, file, env)?;
    if repair {
        let data_dir = config.data_dir.ok_or_else(|| Error::Config("--repair needs --data-dir".into()))?;
        return Ok(Cli::Repair { data_dir, yes });
    }
    if yes {
        return Err(Error::Config("--yes only goes with --repair".into()));
    }
    Ok(Cli::Run(config))
}

/// The password of one layer (flags, or the file): `password` or
/// `password_file`, not both. Errors name the file, never its content.
fn layer_password(password: Option<String>, file: Option<PathBuf>, layer: &str) -> Result<Option<Secret>> {
    match (password, file) {
        (Some(_), Some(_)) => Err(Error::Config(format!("{layer}: give a password or a password file, not both"))),
        (Some(p), None) => Ok(Some(Secret(p))),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path)
                .map_err(|e| Error::Config(format!("cannot read password file {}: {e}", path.display())))?;
            // Files written by `echo` or an editor end with a newline that is
            // not part of the password.
            let text = text.strip_suffix('\n').map_or(text.as_str(), |t| t.strip_suffix('\r').unwrap_or(t));
            if text.is_empty() {
                return Err(Error::Config(format!("password file {} is empty", path.display())));
            }
            Ok(Some(Secret(text.to_string())))
        }
        (None, None) => Ok(None),
    }
}

fn parse_toml(text: &str) -> std::result::Result<FileConfig, String> {
    toml::from_str(text).map_err(|e| e.message().to_string())
}

/// Parses a TOML configuration alone (flags absent).
pub fn from_toml(text: &str) -> Result<Config> {
    merge(FileConfig::default(), parse_toml(text).map_err(Error::Config)?, None)
}

/// Flags win over the file, the file over the environment's password, all
/// of them over the defaults.
fn merge(flags: FileConfig, file: FileConfig, env_password: Option<String>) -> Result<Config> {
    let d = Config::default();
    let listen = match flags.listen.or(file.listen) {
        Some(list) => list.iter().map(|l| ListenAddr::parse(l)).collect::<Result<Vec<_>>>()?,
        None => d.listen,
    };
    let durability = match flags.durability.or(file.durability) {
        Some(text) => durability(&text, "durability")?,
        None => d.durability,
    };
    let config = Config {
        listen,
        durability,
        data_dir: flags.data_dir.or(file.data_dir),
        lease_ms: flags.lease_ms.or(file.lease_ms).unwrap_or(d.lease_ms),
        password: layer_password(flags.password.filter(|p| !p.is_empty()), flags.password_file, "flags")?
            .or(layer_password(file.password.filter(|p| !p.is_empty()), file.password_file, "config file")?)
            .or(env_password.map(Secret)),
        insecure: flags.insecure.or(file.insecure).unwrap_or(d.insecure),
        max_connections: flags.max_connections.or(file.max_connections).unwrap_or(d.max_connections),
        max_unauthenticated: flags.max_unauthenticated.or(file.max_unauthenticated).unwrap_or(d.max_unauthenticated),
        handshake_timeout_ms: flags
            .handshake_timeout_ms
            .or(file.handshake_timeout_ms)
            .unwrap_or(d.handshake_timeout_ms),
        idle_timeout_ms: flags.idle_timeout_ms.or(file.idle_timeout_ms).unwrap_or(d.idle_timeout_ms),
        auth_failure_delay_ms: flags
            .auth_failure_delay_ms
            .or(file.auth_failure_delay_ms)
            .unwrap_or(d.auth_failure_delay_ms),
        completed_retention_ms: flags
            .completed_retention_ms
            .or(file.completed_retention_ms)
            .unwrap_or(d.completed_retention_ms),
        dead_max: flags.dead_max.or(file.dead_max).unwrap_or(d.dead_max),
        compact_threshold_bytes: flags
            .compact_threshold_bytes
            .or(file.compact_threshold_bytes)
            .unwrap_or(d.compact_threshold_bytes),
        max_payload_bytes: flags.max_payload_bytes.or(file.max_payload_bytes).unwrap_or(d.max_payload_bytes),
        max_request_bytes: flags.max_request_bytes.or(file.max_request_bytes).unwrap_or(d.max_request_bytes),
        output_buffer_bytes: flags.output_buffer_bytes.or(file.output_buffer_bytes).unwrap_or(d.output_buffer_bytes),
    };
    config.validate()?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Cli> {
        from_args(list.iter().map(|s| s.to_string()))
    }

    fn run(list: &[&str]) -> Config {
        match args(list).unwrap() {
            Cli::Run(c) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let c = run(&[]);
        assert_eq!(c.listen, vec![ListenAddr::Tcp("127.0.0.1:7777".into())]);
        assert_eq!((c.durability, c.lease_ms, c.max_connections), (Durability::Memory, 30_000, 1024));
        assert_eq!((c.max_payload_bytes, c.max_request_bytes, c.output_buffer_bytes), (64 << 20, 128 << 20, 1 << 20));
    }

    #[test]
    fn memory_limits() {
        let c = run(&["--max-payload-bytes", "1000", "--max-request-bytes=5000", "--output-buffer-bytes", "77"]);
        assert_eq!((c.max_payload_bytes, c.max_request_bytes, c.output_buffer_bytes), (1000, 5000, 77));
        let c = from_toml("max_payload_bytes = 10\nmax_request_bytes = 2000\noutput_buffer_bytes = 3\n").unwrap();
        assert_eq!((c.max_payload_bytes, c.max_request_bytes, c.output_buffer_bytes), (10, 2000, 3));
        for bad in [
            &["--max-payload-bytes", "0"][..],
            &["--max-payload-bytes", "67108865"],
            &["--max-payload-bytes", "1000", "--max-request-bytes", "1500"],
            &["--output-buffer-bytes", "0"],
        ] {
            assert!(matches!(args(bad), Err(Error::Config(_))), "{bad:?}");
        }
    }

    #[test]
    fn listen_forms() {
        let c = run(&[
            "--listen",
            "unix:///tmp/x.sock",
            "--listen=tcp://:9000",
            "--listen",
            "tcp://0.0.0.0:1",
            "--insecure",
        ]);
        assert_eq!(
            c.listen,
            vec![
                ListenAddr::Unix("/tmp/x.sock".into()),
                ListenAddr::Tcp("127.0.0.1:9000".into()),
                ListenAddr::Tcp("0.0.0.0:1".into())
            ]
        );
        assert_eq!(ListenAddr::parse("tcp://7000").unwrap(), ListenAddr::Tcp("127.0.0.1:7000".into()));
        assert!(ListenAddr::parse("http://x:1").is_err());
        assert!(ListenAddr::parse("tcp://x:notaport").is_err());
    }

    #[test]
    fn a_public_address_needs_a_password_or_insecure() {
        for local in ["tcp://127.0.0.1:1", "tcp://127.9.9.9:1", "tcp://localhost:1", "tcp://[::1]:1", "unix:///x"] {
            assert!(ListenAddr::parse(local).unwrap().is_local(), "{local}");
        }
        for public in ["tcp://0.0.0.0:1", "tcp://[::]:1", "tcp://10.0.0.1:1", "tcp://example.org:1"] {
            assert!(!ListenAddr::parse(public).unwrap().is_local(), "{public}");
            let err = args(&["--listen", public]).unwrap_err().message();
            assert!(err.contains("--insecure") && err.contains("without a password"), "{err}");
            assert!(matches!(args(&["--listen", public, "--insecure"]), Ok(Cli::Run(_))));
            assert!(matches!(args(&["--listen", public, "--password", "pw"]), Ok(Cli::Run(_))));
        }
        assert!(from_toml("listen = [\"tcp://0.0.0.0:1\"]").is_err());
        assert!(from_toml("listen = [\"tcp://0.0.0.0:1\"]\ninsecure = true").unwrap().insecure);
    }

    #[test]
    fn the_password_is_never_printed_and_may_come_from_a_file() {
        let dir = crate::testutil::TempDir::new("pwfile");
        let path = dir.path().join("pw");
        std::fs::write(&path, "top-secret\r\n").unwrap();
        let c = run(&["--password-file", path.to_str().unwrap()]);
        assert_eq!(c.password.as_deref(), Some("top-secret"));
        assert!(!format!("{c:?}").contains("top-secret"), "Debug redacts the password");
        // Flags win over the file's password; the environment comes last.
        let toml = dir.path().join("c.toml");
        std::fs::write(&toml, format!("password_file = {:?}\n", path.to_str().unwrap())).unwrap();
        let c = run(&["--config", toml.to_str().unwrap(), "--password", "from-flag"]);
        assert_eq!(c.password.as_deref(), Some("from-flag"));
        let merged = merge(FileConfig::default(), FileConfig::default(), Some("from-env".into())).unwrap();
        assert_eq!(merged.password.as_deref(), Some("from-env"));
        std::fs::write(&path, "\n").unwrap();
        let err = args(&["--password-file", path.to_str().unwrap()]).unwrap_err().message();
        assert!(err.contains("empty"), "{err}");
    }

    #[test]
    fn bad_flags_are_config_errors() {
        for bad in [
            &["--durability", "fast"][..],
            &["--durability", "strict"],
            &["--lease-ms", "abc"],
            &["--frobnicate"],
            &["--listen"],
            &["--lease-ms", "0"],
            &["--max-unauthenticated", "0"],
            &["--handshake-timeout-ms", "0"],
            &["--insecure=yes"],
        ] {
            assert!(matches!(args(bad), Err(Error::Config(_))), "{bad:?}");
        }
        assert_eq!(args(&["--help"]).unwrap(), Cli::Help);
        assert!(matches!(args(&["--repair"]), Err(Error::Config(_))), "--repair needs a data dir");
        assert!(matches!(args(&["--yes"]), Err(Error::Config(_))));
        assert_eq!(
            args(&["--repair", "--data-dir", "/d", "--yes"]).unwrap(),
            Cli::Repair { data_dir: PathBuf::from("/d"), yes: true }
        );
        assert_eq!(args(&["--version"]).unwrap(), Cli::Version);
    }

    #[test]
    fn toml_file_and_flags_win() {
        let dir = crate::testutil::TempDir::new("config");
        let path = dir.path().join("engine.toml");
        std::fs::write(
            &path,
            "listen = [\"unix:///tmp/a.sock\"]\ndurability = \"balanced\"\ndata_dir = \"/var/lib/se\"\n\
             lease_ms = 5000\npassword = \"pw\"\nmax_connections = 10\ncompleted_retention_ms = 1\n\
             dead_max = 2\ncompact_threshold_bytes = 3\n",
        )
        .unwrap();
        let c = run(&["--config", path.to_str().unwrap(), "--lease-ms", "7"]);
        assert_eq!(c.lease_ms, 7, "flag wins");
        assert_eq!(c.durability, Durability::Balanced);
        assert_eq!(c.data_dir, Some(PathBuf::from("/var/lib/se")));
        assert_eq!(c.password.as_deref(), Some("pw"));
        assert_eq!((c.max_connections, c.completed_retention_ms, c.dead_max, c.compact_threshold_bytes), (10, 1, 2, 3));
        assert!(from_toml("lease_ms = \"x\"").is_err());
        assert!(from_toml("unknown_key = 1").is_err());
        assert!(matches!(args(&["--config", "/nonexistent/x.toml"]), Err(Error::Config(_))));
    }
}
