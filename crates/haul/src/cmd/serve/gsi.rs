//! `haul serve`'s GSI settings (`gsiftp://`). GSI is offered whenever a host credential is
//! found where the Globus tools look for one, with no flag; the flags and keys only move or
//! turn it off.

use std::path::PathBuf;

use haul_server::gsi::GsiSettings;

/// The GSI flags (and config keys) of `haul serve`.
#[derive(Debug, Default)]
pub struct GsiOpts {
    /// `--gsi-cert`.
    pub cert: Option<PathBuf>,
    /// `--gsi-key`.
    pub key: Option<PathBuf>,
    /// `--gsi-cert-dir`.
    pub cert_dir: Option<PathBuf>,
    /// `--gridmap`.
    pub gridmap: Option<PathBuf>,
    /// `--gsi-read-only`.
    pub read_only: bool,
    /// `--gsi-max-proxies`.
    pub max_proxies: Option<usize>,
    /// `--no-gsi`.
    pub off: bool,
}

/// The GSI settings, if GSI is to be offered: asked for with --gsi-cert, or a host credential
/// found where the Globus tools look.
pub fn settings(o: GsiOpts) -> anyhow::Result<Option<GsiSettings>> {
    if o.off {
        anyhow::ensure!(
            o.cert.is_none() && o.key.is_none(),
            "--no-gsi contradicts --gsi-cert / --gsi-key"
        );
        return Ok(None);
    }
    let explicit = o.cert.is_some();
    let mut s = GsiSettings::from_environment();
    if let Some(c) = o.cert {
        s.cert = c;
    }
    if let Some(k) = o.key {
        s.key = k;
    }
    if let Some(d) = o.cert_dir {
        s.cert_dir = d;
    }
    if let Some(g) = o.gridmap {
        s.gridmap = g;
    }
    s.access.write = !o.read_only;
    if let Some(n) = o.max_proxies {
        anyhow::ensure!(n >= 1, "--gsi-max-proxies {n}: at least 1");
        s.max_proxies = n;
    }
    Ok((explicit || s.host_credential_present()).then_some(s))
}
