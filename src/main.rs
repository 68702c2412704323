//! The `rnats` binary: nats-server's command line, config file, logging and signals.

use rnats::server::{self, cli, config, logging, options::Options, signals, NATS_VERSION, RNATS_VERSION};
use std::process::ExitCode;

/// nats-server's `PrintAndDie`: the message on stderr, exit 1.
fn die(msg: &str) -> ExitCode {
    eprintln!("{msg}");
    ExitCode::from(1)
}

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
        cli::Command::HelpTls => {
            println!("{}", cli::TLS_USAGE);
            return ExitCode::SUCCESS;
        }
        cli::Command::Signal(spec) => return send_signal(&spec),
        cli::Command::Fail { message, usage, code } => {
            eprintln!("{message}");
            if usage {
                println!("{}", cli::USAGE);
            }
            return ExitCode::from(code as u8);
        }
    };
    let (opts, report) = match with_config_file(*opts, &args) {
        Ok(Some(x)) => x,
        Ok(None) => return ExitCode::SUCCESS,
        Err(code) => return code,
    };
    if let Err(e) = opts.validate() {
        return die(&format!("nats-server: {e}"));
    }
    if let Err(e) = logging::init(&logging::LogConfig::from_options(&opts)) {
        // Go's log.Fatalf: a plain `log` line on stderr, exit 1.
        return die(&logging::std_log_line(&e.to_string()));
    }
    let signals = match signals::Signals::install() {
        Ok(s) => s,
        Err(e) => return die(&format!("nats-server: cannot install signal handlers: {e}")),
    };
    let srv = match server::Server::start(opts) {
        Ok(s) => s,
        Err(server::StartError::Ocsp(e)) => return die(&format!("nats-server: {e}")),
        Err(e) => {
            logging::fatal(&e.to_string());
            return ExitCode::from(1);
        }
    };
    for note in report.notes {
        tracing::warn!("{note}");
    }
    signals::run(srv, signals, &args);
    ExitCode::SUCCESS
}

/// Load `-c`, apply the flags over it, handle `-t`. `Ok(None)`: done (`-t` passed).
fn with_config_file(opts: Options, args: &[String]) -> Result<Option<(Options, config::Report)>, ExitCode> {
    if opts.config_file.is_empty() {
        if opts.check_config {
            return Err(die(
                "nats-server: must specify [-c, --config] option to check configuration file syntax",
            ));
        }
        let mut opts = opts;
        opts.apply_baseline();
        return Ok(Some((opts, config::Report::default())));
    }
    let path = opts.config_file.clone();
    let mut file_opts = Options::default();
    let report = match config::apply_file(&path, &mut file_opts) {
        Ok(r) => r,
        Err(e) => return Err(die(&format!("nats-server: {e}"))),
    };
    if !report.warnings.is_empty() {
        if opts.check_config {
            return Err(die(&format!("nats-server: {}", report.warnings_text())));
        }
        eprint!("{}", report.warnings_text());
    }
    if opts.check_config {
        eprintln!(
            "nats-server: configuration file {path} is valid ({})",
            file_opts.config_digest
        );
        return Ok(None);
    }
    let mut merged = match cli::parse_onto(args, file_opts) {
        cli::Command::Run(o) => *o,
        _ => opts,
    };
    merged.apply_baseline();
    Ok(Some((merged, report)))
}

#[cfg(unix)]
fn send_signal(spec: &str) -> ExitCode {
    match signals::send_command(spec) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => die(&format!("nats-server: {e}")),
    }
}

#[cfg(not(unix))]
fn send_signal(_spec: &str) -> ExitCode {
    die("nats-server: signals are not supported on this platform")
}
