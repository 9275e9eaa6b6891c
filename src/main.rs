//! The `kcm` binary: parse the command line, install logging and the shutdown signal,
//! and hand over to the library. Errors are printed once, with their whole chain.

use tracing_subscriber::EnvFilter;

fn main() -> std::process::ExitCode {
    let cli = kcm::cli::Cli::parse_env();
    // The demo narrates on stdout and the bench and the lab print a table; their logs would drown
    // them unless asked for.
    let quiet = matches!(&cli.command, kcm::cli::Command::Up(up) if up.demo)
        || matches!(&cli.command, kcm::cli::Command::Bench(_))
        || matches!(&cli.command, kcm::cli::Command::Lab(_));
    init_tracing(cli.global.verbose, quiet);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("kcm: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(kcm::cli::run(cli, shutdown_signal())) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kcm: {e:#}");
            // 128 + SIGINT, as a shell reports a command ended by Ctrl-C.
            if e.downcast_ref::<kcm::kubecfg::Interrupted>().is_some() {
                return std::process::ExitCode::from(130);
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// `-v` levels map to glog's V levels, as `--verbose`'s help says: none = kcm's info
/// (warn when `quiet`), -v = kcm's debug, -vv = kcm's trace, -vvv and more = every
/// crate's trace. `RUST_LOG` overrides.
fn init_tracing(verbose: u8, quiet: bool) {
    let default = match verbose {
        0 if quiet => "warn",
        0 => "kcm=info,warn",
        1 => "kcm=debug,info",
        2 => "kcm=trace,info",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// Resolves on Ctrl-C or SIGTERM (docker and systemd send SIGTERM).
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("install the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
