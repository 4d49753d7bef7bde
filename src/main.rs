//! `waferstream` — command-line front end of the cycle-accurate MoE hardware model.

mod cli;

use std::process::ExitCode;

use clap::Parser;

#[cfg(unix)]
extern "C" {
    fn signal(signum: i32, handler: usize) -> usize;
}

/// A closed stdout (`waferstream ... | head -1`) ends the process quietly, as for any Unix
/// filter: Rust ignores SIGPIPE by default, which turns every later `println!` into a
/// "Broken pipe" panic. Restoring the default disposition lets the kernel end the process.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: setting SIGPIPE (13 on Linux/macOS/BSD) to SIG_DFL (0) before any thread starts.
    unsafe {
        signal(13, 0);
    }
}

fn main() -> ExitCode {
    restore_sigpipe();
    // `RUST_LOG=info` (run boundaries: scenario, strategy, tokens, layers) or `=debug` (each
    // layer batch) logs on stderr, beside the progress bars; unset or unparsable, warnings
    // only. Colour only on a terminal, so a redirected log is plain text.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = cli::Cli::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            // One line, whatever a dependency's message holds.
            let one: Vec<&str> = e.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            eprintln!("error: {}", one.join("; "));
            ExitCode::from(2)
        }
    }
}
