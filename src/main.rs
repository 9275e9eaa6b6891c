//! The `kcm` binary: parse the command line, install logging and the shutdown signal,
//! and hand over to the library. Errors are printed once, with their whole chain.

fn main() -> std::process::ExitCode {
    let cli = kcm::cli::Cli::parse_env();
    // The demo narrates on stdout and the bench and the lab print a table; their logs would drown
    // them unless asked for.
    let quiet = matches!(&cli.command, kcm::cli::Command::Up(up) if up.demo)
        || matches!(&cli.command, kcm::cli::Command::Bench(_))
        || matches!(&cli.command, kcm::cli::Command::Lab(_));
    kcm::cli::init_tracing(cli.global.verbose, quiet);
    let runtime = match cli.global.runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("kcm: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(kcm::cli::run(cli, kcm::cli::shutdown_signal())) {
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
