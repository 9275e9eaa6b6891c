//! The `kcm-controller-manager` binary: `kcm controller-manager` alone. The same flags and
//! the same loops, in a binary without the API server, the bench, the lab and the client
//! commands, so a process that runs only the controllers maps a third of kcm's code
//! (docs/PERFORMANCE.md measures what that saves).

fn main() -> std::process::ExitCode {
    let cli = kcm::cli::StandaloneControllerManager::parse_env();
    kcm::cli::init_tracing(cli.global.verbose, false);
    let runtime = match cli.global.runtime() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("kcm-controller-manager: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let run = async {
        let target = (&cli.global).try_into()?;
        let config = cli.args.config(&target);
        kcm::controller_manager::run(config, kcm::cli::shutdown_signal()).await
    };
    match runtime.block_on(run) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kcm-controller-manager: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
