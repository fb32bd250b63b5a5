//! Control sessions kept between planning and moving the data. `haul cp` logs in once to look
//! at the source (`MLST`, a walk) before it transfers; on a 100 ms path, quitting that session
//! and logging in again for the transfer cost seven round trips (`QUIT`, connect, banner,
//! `USER`, `PASS`, `FEAT`, `TYPE I`), 0.7 s. The planner parks its sessions here and the first
//! workers to the same server take them instead of connecting, as an HTTP client's pool does.
//! Through relays the saving is larger: each relay logs in to its next hop for every session.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Session;
use crate::url::RemoteUrl;

/// A parked session older than this is closed rather than handed out: the server may have
/// timed it out, and a transfer should not start on a dead control connection.
const MAX_IDLE: Duration = Duration::from_secs(10);

/// Logged-in sessions waiting for a worker; shared by the planner and the engine of one copy.
#[derive(Default)]
pub struct Spare {
    parked: Mutex<Vec<(Instant, Session)>>,
}

impl std::fmt::Debug for Spare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.parked.lock().map_or(0, |p| p.len());
        f.debug_struct("Spare").field("parked", &n).finish()
    }
}

/// The same server, as the same user, over the same kind of control channel, and through the
/// same relays: a session for a nested path carries the features of its chain's end.
fn same_login(a: &RemoteUrl, b: &RemoteUrl) -> bool {
    use haul_proto::nested::chain;
    same_server(a, b) && chain(&a.path) == chain(&b.path)
}

fn same_server(a: &RemoteUrl, b: &RemoteUrl) -> bool {
    a.tls == b.tls
        && a.gsi == b.gsi
        && a.host == b.host
        && a.port == b.port
        && a.user == b.user
        && a.pass == b.pass
}

/// Whether a session logged in as `a` can carry a transfer for `b`: the same login, or the
/// same server logged in with no relay chain of its own and `b` going through relays from it
/// (a relay takes the chain with each command; the session then takes the chain end's
/// features, [`Session::retarget`]).
pub fn could_carry(a: &RemoteUrl, b: &RemoteUrl) -> bool {
    use haul_proto::nested::is_nested;
    same_login(a, b) || (same_server(a, b) && !is_nested(&a.path) && is_nested(&b.path))
}

impl Spare {
    /// Keeps `s` for a worker; a session that cannot be reused is closed instead.
    pub fn park(&self, s: Session) {
        if !s.reusable() {
            return s.quit();
        }
        match self.parked.lock() {
            Ok(mut p) => p.push((Instant::now(), s)),
            Err(_) => s.quit(),
        }
    }

    /// A parked session logged in as `url` asks, if one was parked within [`MAX_IDLE`]; or
    /// one logged in to its first relay with no chain ([`could_carry`]), taken over for
    /// `url`'s chain.
    pub fn take(&self, url: &RemoteUrl) -> Option<Session> {
        let mut s = {
            let mut p = self.parked.lock().ok()?;
            let now = Instant::now();
            for (_, s) in p.extract_if(.., |(at, _)| now.duration_since(*at) > MAX_IDLE) {
                s.quit();
            }
            let i = p
                .iter()
                .position(|(_, s)| same_login(s.url(), url))
                .or_else(|| p.iter().position(|(_, s)| could_carry(s.url(), url)))?;
            p.swap_remove(i).1
        };
        if same_login(s.url(), url) {
            return Some(s);
        }
        match s.retarget(url) {
            Ok(()) => Some(s),
            Err(e) => {
                tracing::debug!("a parked session could not take {}: {e}", url.host_port());
                s.quit();
                None
            }
        }
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        if let Ok(p) = self.parked.get_mut() {
            for (_, s) in p.drain(..) {
                s.quit();
            }
        }
    }
}
