//! GSI for `haul serve` (`gsiftp://`): the host credential, the trusted CAs and the
//! grid-mapfile, found where the Globus tools find them, and what a session needs from them:
//! the acceptor's TLS configuration for `AUTH GSSAPI`, the account a certificate identity maps
//! to, and the settings of its data connections (`DCAU`), which present the credential the
//! client delegated, or the host credential when it delegated none.

use std::path::PathBuf;
use std::sync::Arc;

use haul_gsi::tls::acceptor_config;
use haul_gsi::{Credential, Gridmap, PeerPolicy, TrustStore};
use haul_transport::gsi::{DataCredential, DataGsi, Expect};

use crate::auth::Access;

/// Where GSI's files are and what mapped accounts may do.
#[derive(Debug, Clone)]
pub struct GsiSettings {
    /// Host certificate (PEM).
    pub cert: PathBuf,
    /// Its key (PEM, readable by the owner only).
    pub key: PathBuf,
    /// The trusted CAs (`<hash>.0`, `.r0`, `.signing_policy`).
    pub cert_dir: PathBuf,
    /// The grid-mapfile.
    pub gridmap: PathBuf,
    /// Rights of a mapped account the users file does not list.
    pub access: Access,
    /// Most proxies accepted in a client's chain.
    pub max_proxies: usize,
}

impl GsiSettings {
    /// The Globus defaults: `X509_USER_CERT`/`X509_USER_KEY` or `/etc/grid-security/host*.pem`,
    /// `X509_CERT_DIR` or `/etc/grid-security/certificates`, `GRIDMAP` or
    /// `/etc/grid-security/grid-mapfile`; mapped accounts may read and write.
    pub fn from_environment() -> GsiSettings {
        let (cert, key) = Credential::host_paths();
        GsiSettings {
            cert,
            key,
            cert_dir: TrustStore::default_dir(),
            gridmap: Gridmap::default_path(),
            access: Access {
                write: true,
                third_party: true,
                relay: false,
            },
            max_proxies: haul_gsi::chain::DEFAULT_MAX_PROXIES,
        }
    }

    /// Whether a host credential is there to offer GSI with.
    pub fn host_credential_present(&self) -> bool {
        self.cert.is_file() && self.key.is_file()
    }
}

/// A server's loaded GSI material.
pub struct GsiServer {
    /// How client chains are checked.
    pub policy: PeerPolicy,
    /// The TLS side of `AUTH GSSAPI`.
    pub acceptor: Arc<rustls::ServerConfig>,
    /// The host credential.
    pub host: Credential,
    /// The host credential as data connections present it (sessions that did not delegate).
    host_data: DataCredential,
    /// The identity map.
    pub gridmap: Gridmap,
    /// Rights of mapped accounts the users file does not list.
    pub access: Access,
}

impl std::fmt::Debug for GsiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GsiServer")
            .field("gridmap", &self.gridmap.len())
            .finish_non_exhaustive()
    }
}

impl GsiServer {
    /// Loads the host credential, the CAs and the grid-mapfile, checking that the host
    /// certificate itself is valid under those CAs.
    pub fn load(s: &GsiSettings) -> Result<GsiServer, String> {
        let host = Credential::load(&s.cert, &s.key).map_err(|e| e.to_string())?;
        let trust = TrustStore::load_dir(&s.cert_dir).map_err(|e| e.to_string())?;
        let gridmap = Gridmap::load(&s.gridmap).map_err(|e| e.to_string())?;
        let policy = PeerPolicy::new(trust, s.max_proxies);
        let me = policy
            .verify(&host.chain_slices())
            .map_err(|e| format!("host certificate {}: {e}", s.cert.display()))?;
        let acceptor = acceptor_config(&host, &policy).map_err(|e| e.to_string())?;
        let host_data =
            DataCredential::new(&host, &policy.delegated()).map_err(|e| e.to_string())?;
        tracing::info!(host = %me.subject, cas = policy.trust.anchors.len(), mapped = gridmap.len(), "GSI offered");
        Ok(GsiServer {
            policy,
            acceptor,
            host,
            host_data,
            gridmap,
            access: s.access,
        })
    }

    /// What a session's data connections present: `delegated` (the credential its client
    /// delegated), made ready on a thread of its own while the login goes on, else the host's.
    pub fn data_credential(&self, delegated: Option<Credential>) -> DataCredential {
        match delegated {
            Some(c) => DataCredential::spawn(move || Ok(c), self.policy.delegated()),
            None => self.host_data.clone(),
        }
    }

    /// The settings of the next data connections. Their peer may be another server presenting
    /// the credential the client delegated to it, one proxy deeper than the client's own chain.
    pub fn data(&self, cred: &DataCredential, expect: Expect, protect: bool) -> DataGsi {
        DataGsi {
            cred: cred.clone(),
            policy: self.policy.delegated(),
            expect,
            protect,
        }
    }
}
