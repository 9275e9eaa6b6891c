//! What every kcm process sets up before its command runs: logging and the shutdown
//! signal (the `kcm` binary and `kcm-controller-manager`).

use tracing_subscriber::EnvFilter;

/// `-v` levels map to glog's V levels, as `--verbose`'s help says: none = kcm's info
/// (warn when `quiet`), -v = kcm's debug, -vv = kcm's trace, -vvv and more = every
/// crate's trace. `RUST_LOG` overrides.
pub fn init_tracing(verbose: u8, quiet: bool) {
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
pub async fn shutdown_signal() {
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
