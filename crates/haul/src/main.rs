//! The `haul` command line: argument parsing, progress display and wiring. No protocol logic.

mod cmd;

use clap::{Parser, Subcommand};

/// Move big data over long, fast networks, tuned automatically.
#[derive(Parser, Debug)]
#[command(name = "haul", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Move data the best way haul knows: plan the route and transport, profile, tune, move,
    /// verify and record (start here).
    Send(cmd::send::Args),
    /// Plan a transfer without moving anything: the chosen route and transport, why, and the
    /// predicted time.
    Plan(cmd::send::PlanArgs),
    /// Serve a directory tree over GridFTP (and haul's TLS dialect).
    Serve(cmd::serve::Args),
    /// Copy files or trees between local paths and GridFTP / haul servers.
    Cp(Box<cmd::cp::Args>),
    /// Run haul's main job on an embedded default: a loopback server, a sample dataset, a verified transfer.
    Demo(cmd::demo::Args),
    /// List and filter the history of transfers.
    History(cmd::history::Args),
    /// Choose a route: direct or through relays, from predicted leg throughputs.
    Route(cmd::route::Args),
    /// Emulate wide-area links between network namespaces.
    Netem(cmd::netem::Args),
    /// Profile a transport over a path (TPG) and tune it (FastProf).
    Profile(cmd::profile::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    cmd::init_tracing();
    let result = match cli.command {
        Command::Send(a) => cmd::send::run(a),
        Command::Plan(a) => cmd::send::run_plan(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Cp(a) => cmd::cp::run(*a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::History(a) => cmd::history::run(a),
        Command::Route(a) => cmd::route::run(a),
        Command::Netem(a) => cmd::netem::run(a),
        Command::Profile(a) => cmd::profile::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("haul: error: {e:#}");
            cmd::exit_code_for(&e)
        }
    }
}
