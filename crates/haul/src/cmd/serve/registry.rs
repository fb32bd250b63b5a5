//! `haul serve --registry-gather`: the servers an aggregating registry polls, with the logins
//! and CA of the relay's configuration, turned into a running [`haul_overlay::registry::Registry`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use haul_overlay::registry::Registry;
use haul_overlay::Credential;
use haul_server::journal::Aggregated;
use haul_xfer::tls::ClientTls;
use haul_xfer::RemoteUrl;

use super::relay::Built;

/// Starts polling `servers` every `interval` when any are given; None otherwise.
pub fn start(
    (servers, interval): &(Vec<String>, Duration),
    relay: &Built,
) -> anyhow::Result<Option<Arc<dyn Aggregated>>> {
    if servers.is_empty() {
        return Ok(None);
    }
    let urls = logins(servers, "--registry-gather", relay)?;
    let tls = match &relay.ca {
        Some(ca) => Some(ClientTls::from_ca_file(ca).context("--relay-ca")?),
        None if urls.iter().any(|u| u.tls) => {
            anyhow::bail!("--registry-gather: haul:// servers need --relay-ca to check them with")
        }
        None => None,
    };
    let names: Vec<String> = urls.iter().map(|u| u.host_port()).collect();
    let registry = Registry::start(urls, tls, *interval).context("--registry-gather")?;
    tracing::info!(servers = ?names, every_s = interval.as_secs(), "registry polling");
    Ok(Some(Arc::new(registry)))
}

/// The servers `list` names for `flag` (`HOST:PORT` or a URL; ftp:// and haul://, not
/// gsiftp://, for which the server has no user credential to present), each with the login the
/// relay configuration's `[[credentials]]` give for its host and port, else none (anonymous).
pub fn logins(list: &[String], flag: &str, relay: &Built) -> anyhow::Result<Vec<RemoteUrl>> {
    let mut urls = Vec::new();
    for s in list {
        let mut url = crate::cmd::route::relay_url(s, "ftp").context(flag.to_string())?;
        anyhow::ensure!(
            !url.gsi,
            "{flag} {s}: ftp:// and haul:// servers only, not gsiftp://"
        );
        Credential::fill(&relay.credentials, &mut url);
        urls.push(url);
    }
    Ok(urls)
}
