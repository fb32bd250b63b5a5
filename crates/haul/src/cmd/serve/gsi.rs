//! `haul serve`'s GSI flags (`gsiftp://`). GSI is offered whenever a host credential is found
//! where the Globus tools look for one, with no flag; these flags only move or turn it off.

use std::path::PathBuf;

use haul_server::gsi::GsiSettings;

/// GSI flags of `haul serve`.
#[derive(clap::Args, Debug)]
pub struct GsiArgs {
    /// Host certificate for GSI (default: $X509_USER_CERT, else /etc/grid-security/hostcert.pem).
    #[arg(long)]
    gsi_cert: Option<PathBuf>,
    /// Host key for GSI (default: $X509_USER_KEY, else /etc/grid-security/hostkey.pem).
    #[arg(long)]
    gsi_key: Option<PathBuf>,
    /// Trusted CA directory (default: $X509_CERT_DIR, else /etc/grid-security/certificates).
    #[arg(long)]
    gsi_cert_dir: Option<PathBuf>,
    /// grid-mapfile (default: $GRIDMAP, else /etc/grid-security/grid-mapfile).
    #[arg(long)]
    gridmap: Option<PathBuf>,
    /// Mapped accounts not in the users file may only read (default: read and write).
    #[arg(long)]
    gsi_read_only: bool,
    /// Most proxy certificates accepted in a client's chain.
    #[arg(long, default_value_t = haul_gsi::chain::DEFAULT_MAX_PROXIES)]
    gsi_max_proxies: usize,
    /// Do not offer GSI even if a host credential is present.
    #[arg(long, conflicts_with_all = ["gsi_cert", "gsi_key"])]
    no_gsi: bool,
}

impl GsiArgs {
    /// The GSI settings, if GSI is to be offered: asked for with --gsi-cert, or a host
    /// credential found where the Globus tools look.
    pub fn build(self) -> Option<GsiSettings> {
        if self.no_gsi {
            return None;
        }
        let explicit = self.gsi_cert.is_some();
        let mut s = GsiSettings::from_environment();
        if let Some(c) = self.gsi_cert {
            s.cert = c;
        }
        if let Some(k) = self.gsi_key {
            s.key = k;
        }
        if let Some(d) = self.gsi_cert_dir {
            s.cert_dir = d;
        }
        if let Some(g) = self.gridmap {
            s.gridmap = g;
        }
        s.access.write = !self.gsi_read_only;
        s.max_proxies = self.gsi_max_proxies;
        (explicit || s.host_credential_present()).then_some(s)
    }
}
