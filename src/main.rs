//! The `rnats` binary: nats-server's command line, logging and signals.

use rnats::server::{self, cli, logging, NATS_VERSION, RNATS_VERSION};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match cli::parse(&args) {
        cli::Command::Run(o) => o,
        cli::Command::Version => {
            println!("nats-server: v{NATS_VERSION} (rnats v{RNATS_VERSION})");
            return ExitCode::SUCCESS;
        }
        cli::Command::Help => {
            println!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        cli::Command::Fail { message, usage, code } => {
            eprintln!("{message}");
            if usage {
                println!("{}", cli::USAGE);
            }
            return ExitCode::from(code as u8);
        }
    };
    let log = logging::LogConfig {
        debug: opts.debug,
        trace: opts.trace,
        logtime: opts.logtime,
        utc: opts.logtime_utc,
        file: opts.log_file.clone(),
    };
    if let Err(e) = logging::init(&log) {
        eprintln!("nats-server: error opening log file {}: {e}", opts.log_file);
        return ExitCode::from(1);
    }
    let signals = match Signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nats-server: cannot install signal handlers: {e}");
            return ExitCode::from(1);
        }
    };
    let srv = match server::Server::start(*opts) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            fatal(&e.to_string());
            return ExitCode::from(1);
        }
    };
    let name = signals.wait();
    tracing::info!("Trapped {name:?} signal");
    srv.shutdown();
    ExitCode::SUCCESS
}

/// nats-server prints fatal startup errors as an `[FTL]` log line on stderr.
fn fatal(msg: &str) {
    eprintln!("[{}] {} [FTL] {msg}", std::process::id(), logging::timestamp(false));
}

#[cfg(unix)]
struct Signals(signal_hook::iterator::Signals);

#[cfg(unix)]
impl Signals {
    fn install() -> std::io::Result<Self> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        Ok(Signals(signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?))
    }

    /// Block until SIGINT or SIGTERM; returns Go's name for it.
    fn wait(mut self) -> &'static str {
        use signal_hook::consts::SIGINT;
        loop {
            if let Some(sig) = self.0.forever().next() {
                return if sig == SIGINT { "interrupt" } else { "terminated" };
            }
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn install() -> std::io::Result<Self> {
        Ok(Signals)
    }
    fn wait(self) -> &'static str {
        loop {
            std::thread::park();
        }
    }
}
