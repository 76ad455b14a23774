//! `solid-engine-server`: parses flags and the config file, binds the
//! listeners, recovers the data directory, serves until SIGTERM/SIGINT.
//! Exit codes: 0 after a clean shutdown, 2 for bad flags or configuration,
//! 1 for any other failure (bind, recovery, storage).

use std::process::ExitCode;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use solid_engine::config::{self, Cli};
use solid_engine::server::{bind_all, Server, ShutdownHandle};
use solid_engine::Error;

fn main() -> ExitCode {
    let config = match config::from_args(std::env::args().skip(1)) {
        Ok(Cli::Run(config)) => config,
        Ok(Cli::Help) => {
            print!("{}", config::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(Cli::Version) => {
            println!("solid-engine-server {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("solid-engine-server: {}", e.message());
            eprintln!("try 'solid-engine-server --help'");
            return ExitCode::from(2);
        }
    };
    match run(config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ Error::Config(_)) => {
            eprintln!("solid-engine-server: {}", e.message());
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("solid-engine-server: {}", e.message());
            ExitCode::from(1)
        }
    }
}

fn run(config: config::Config) -> solid_engine::Result<()> {
    // Signals first, so a SIGTERM during recovery is not lost.
    let shutdown = ShutdownHandle::new();
    let mut signals = Signals::new([SIGTERM, SIGINT])?;
    let signal_handle = signals.handle();
    {
        let shutdown = shutdown.clone();
        std::thread::Builder::new().name("signals".into()).spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let name = if signal == SIGTERM { "SIGTERM" } else { "SIGINT" };
                solid_engine::log(format_args!("received {name}, shutting down"));
                shutdown.trigger();
            }
        })?;
    }
    let server = Server::open(config.clone())?;
    let listeners = bind_all(&config.listen)?;
    let result = server.run(listeners, shutdown);
    signal_handle.close();
    result
}
