//! `haul serve`'s signals, through `signal-hook`'s iterator on a thread of its own: SIGHUP
//! reloads the users file, the TLS material and the server's reload hooks (an error keeps what
//! was in force); the first SIGTERM or SIGINT drains the server (the control port closes,
//! running transfers finish, sessions close at their next transfer command or when idle), a
//! second one closes every session at once.

use std::time::Duration;

use haul_server::ServerOps;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Starts the signal thread for the server behind `ops`.
pub fn handle(ops: ServerOps) -> anyhow::Result<()> {
    let mut signals = Signals::new([SIGHUP, SIGTERM, SIGINT])?;
    std::thread::Builder::new()
        .name("haul-signals".into())
        .spawn(move || {
            let mut draining = false;
            for sig in signals.forever() {
                match sig {
                    SIGHUP => match ops.reload() {
                        Ok(r) if r.failed_hooks.is_empty() => {
                            tracing::info!(users = r.users, tls = r.tls, "reloaded")
                        }
                        Ok(r) => tracing::error!(
                            users = r.users,
                            tls = r.tls,
                            failed = ?r.failed_hooks,
                            "reloaded, except"
                        ),
                        Err(e) => tracing::error!("reload failed, the old settings stay: {e}"),
                    },
                    _ if draining => {
                        tracing::warn!("second stop signal: closing every session now");
                        ops.close_all();
                    }
                    _ => {
                        draining = true;
                        ops.drain();
                        tracing::info!(
                            sessions = ops.sessions(),
                            "draining: no new sessions; running transfers finish"
                        );
                    }
                }
            }
        })?;
    Ok(())
}

/// After the accept loop ended: waits up to `limit` for the sessions to end, then closes the
/// rest (their clients resume from restart markers) and gives them a moment to go.
pub fn drain(ops: &ServerOps, limit: Duration) {
    if ops.wait_idle(limit) {
        tracing::info!("drained");
        return;
    }
    tracing::warn!(
        sessions = ops.sessions(),
        "drain timeout ({} s): closing the remaining sessions",
        limit.as_secs()
    );
    ops.close_all();
    if !ops.wait_idle(Duration::from_secs(5)) {
        tracing::warn!(sessions = ops.sessions(), "sessions still open; exiting");
    }
}
