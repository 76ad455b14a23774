//! `solid-engine-server`: parses flags and the config file, binds the
//! listeners, recovers the data directory, serves until SIGTERM/SIGINT.
//! Exit codes: 0 after a clean shutdown, 2 for bad flags or configuration,
//! 1 for any other failure (bind, recovery, storage).
//!
//! `--repair` instead cuts the log at its first bad record once the
//! operator confirms (or at once with `--yes`): 0 when repaired or nothing
//! was wrong, 1 when declined or the repair failed.

use std::io::{BufRead, Write};
use std::path::Path;
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
        Ok(Cli::Repair { data_dir, yes }) => return repair(&data_dir, yes),
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

/// Asks on stdin unless `yes`; anything but "y"/"yes" (or end of input)
/// declines, so a script that forgot `--yes` changes nothing.
fn repair(data_dir: &Path, yes: bool) -> ExitCode {
    let result = solid_engine::storage::repair(data_dir, |plan| {
        println!("{}", plan.describe());
        if yes {
            return true;
        }
        print!("Truncate there? Everything after it is lost. [y/N] ");
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    });
    match result {
        Ok(None) => {
            println!("{}: every log reads cleanly, nothing to repair", data_dir.display());
            ExitCode::SUCCESS
        }
        Ok(Some(plan)) if plan.applied => {
            println!("repaired: {} truncated to {} bytes", plan.file.display(), plan.offset);
            ExitCode::SUCCESS
        }
        Ok(Some(_)) => {
            println!("not repaired: nothing was changed");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("solid-engine-server: repair failed: {}", e.message());
            ExitCode::from(1)
        }
    }
}
