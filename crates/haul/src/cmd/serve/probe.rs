//! `haul serve --probe`: scheduled probes, off by default (nothing is probed that a user did not
//! ask to move unless an operator turns them on). Every interval, jittered so that many servers
//! do not probe at once, the server downloads `/dev/zero` from each listed peer to `/dev/null`,
//! memory to memory, one peer at a time, as `haul cp` would ([`crate::cmd::cp::copy`]), and
//! records each probe in its own history as kind `probe`. `SITE BTC` then predicts those legs
//! too (`predict`): a probe of peer P measured P → this server.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::ToSocketAddrs;
use std::path::Path;
use std::time::Duration;

use haul_xfer::RemoteUrl;

use super::relay::Built;

/// The first round comes within this long of the start, or of one interval when shorter.
const FIRST_WITHIN: Duration = Duration::from_secs(60);

/// Each later round comes one interval on, give or take this fraction.
const JITTER: f64 = 0.1;

/// What `--probe`, `--probe-interval` and `--probe-bytes` ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The servers to download from (none: no probes).
    pub peers: Vec<String>,
    /// Time between rounds.
    pub interval: Duration,
    /// Bytes each probe moves.
    pub bytes: u64,
}

/// Starts probing on a thread of its own when `plan` names peers, recording in `history`; each
/// probe's data phase may go `data_timeout` without moving a byte.
pub fn start(
    plan: &Plan,
    relay: &Built,
    history: Option<&Path>,
    data_timeout: Duration,
) -> anyhow::Result<()> {
    if plan.peers.is_empty() {
        return Ok(());
    }
    let Some(history) = history else {
        anyhow::bail!("--probe records its probes in the history: it needs one");
    };
    let peers = super::registry::logins(&plan.peers, "--probe", relay)?;
    if let Some(u) = peers.iter().find(|u| u.tls) {
        anyhow::bail!("--probe {}: ftp:// servers only", u.server(false));
    }
    let names: Vec<String> = peers.iter().map(|u| u.host_port()).collect();
    tracing::info!(peers = ?names, every_s = plan.interval.as_secs(), bytes = plan.bytes, "scheduled probes");
    let (plan, history) = (plan.clone(), history.to_path_buf());
    std::thread::Builder::new()
        .name("haul-probe".into())
        .spawn(move || {
            std::thread::sleep(plan.interval.min(FIRST_WITHIN).mul_f64(random()));
            loop {
                for peer in &peers {
                    probe(peer, &plan, &history, data_timeout);
                }
                let spread = 1.0 + JITTER * (2.0 * random() - 1.0);
                std::thread::sleep(plan.interval.mul_f64(spread));
            }
        })?;
    Ok(())
}

/// One probe: `plan.bytes` of the peer's `/dev/zero` to `/dev/null`, recorded in `history`. The
/// peer is reached at the address its name has now, so the record names it by address, as
/// `SITE BTC` names peers.
fn probe(peer: &RemoteUrl, plan: &Plan, history: &Path, data_timeout: Duration) {
    let addr = match (peer.host.as_str(), peer.port).to_socket_addrs() {
        Ok(mut a) => a.next(),
        Err(e) => {
            tracing::warn!(peer = %peer.host_port(), "probe: cannot resolve: {e}");
            return;
        }
    };
    let Some(addr) = addr else { return };
    let mut url = peer.clone();
    url.host = addr.ip().to_string();
    let words = [
        format!("{}/dev/zero", url.server(true)),
        "/dev/null".into(),
        "-q".into(),
        "--len".into(),
        plan.bytes.to_string(),
        "--data-timeout".into(),
        data_timeout.as_secs().max(1).to_string(),
        "--history".into(),
        history.display().to_string(),
    ];
    let run = crate::cmd::cp::args_from(&words).and_then(|mut cp| {
        cp.kind = Some("probe");
        crate::cmd::cp::copy(cp)
    });
    match run {
        Ok(c) => tracing::info!(
            peer = %peer.host_port(),
            bytes = c.summary.bytes,
            seconds = c.summary.duration_s,
            bps = c.summary.mean_bps(),
            "probe"
        ),
        Err(e) => tracing::warn!(peer = %peer.host_port(), "probe failed: {e:#}"),
    }
}

/// A number in [0, 1) that differs between processes and calls (std's hash keys are random).
fn random() -> f64 {
    let h = RandomState::new().build_hasher().finish();
    (h >> 11) as f64 / (1u64 << 53) as f64
}
