//! GSI for `haul serve` (`gsiftp://`): the host credential, the trusted CAs and the
//! grid-mapfile, found where the Globus tools find them, and what a session needs from them:
//! the acceptor's TLS configuration for `AUTH GSSAPI`, the account a certificate identity maps
//! to, and the settings of its data connections (`DCAU`), which present the credential the
//! client delegated, or the host credential when it delegated none.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, Once};

use rustls::pki_types::PrivatePkcs8KeyDer;

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

/// RSA-2048 keys for the proxies a relay presents to its `gsiftp://` next hops, made ahead on a
/// thread of their own. A relay acts for its client with the credential the client delegated,
/// whose key is P-256, and delegates onward; a Globus server accepting a delegation makes its
/// new key the size of the delegator's, and from a P-256 leaf tries a 256-bit RSA key and fails
/// the login. So the relay presents a proxy of the delegated credential with an RSA key. Making
/// one costs tens of milliseconds, so up to [`SPARE_KEYS`] wait ready, and a relay that finds
/// none waits for the next one (at most [`KEY_WAIT`]).
struct KeyPool {
    ready: Mutex<Vec<PrivatePkcs8KeyDer<'static>>>,
    changed: Condvar,
}

/// Keys kept ready.
const SPARE_KEYS: usize = 2;
/// Longest wait for a key.
const KEY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The pool, its filling thread started on first use.
fn key_pool() -> &'static KeyPool {
    static POOL: KeyPool = KeyPool {
        ready: Mutex::new(Vec::new()),
        changed: Condvar::new(),
    };
    static FILLER: Once = Once::new();
    FILLER.call_once(|| {
        let made = std::thread::Builder::new()
            .name("gsi-relay-keys".into())
            .spawn(|| POOL.fill());
        if let Err(e) = made {
            tracing::warn!(error = %e, "no thread to make RSA keys for relayed gsiftp:// hops");
        }
    });
    &POOL
}

impl KeyPool {
    fn fill(&self) {
        loop {
            let key = openssl::rsa::Rsa::generate(2048)
                .and_then(openssl::pkey::PKey::from_rsa)
                .and_then(|k| k.private_key_to_pkcs8());
            let key = match key {
                Ok(der) => PrivatePkcs8KeyDer::from(der),
                Err(e) => {
                    tracing::warn!(error = %e, "making an RSA key for relayed gsiftp:// hops");
                    return;
                }
            };
            let mut ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
            ready.push(key);
            self.changed.notify_all();
            while ready.len() >= SPARE_KEYS {
                ready = self.changed.wait(ready).unwrap_or_else(|p| p.into_inner());
            }
        }
    }

    fn take(&self) -> Option<PrivatePkcs8KeyDer<'static>> {
        let ready = self.ready.lock().unwrap_or_else(|p| p.into_inner());
        let (mut ready, _) = self
            .changed
            .wait_timeout_while(ready, KEY_WAIT, |r| r.is_empty())
            .unwrap_or_else(|p| p.into_inner());
        let key = ready.pop();
        self.changed.notify_all();
        key
    }
}

/// Starts making the RSA keys a relay's `gsiftp://` next hops take (see [`KeyPool`]).
pub fn warm_relay_keys() {
    key_pool();
}

/// An RSA key for the proxy a relay presents to a `gsiftp://` next hop (see [`KeyPool`]).
pub fn relay_key() -> Option<PrivatePkcs8KeyDer<'static>> {
    key_pool().take()
}

#[cfg(test)]
mod tests {
    #[test]
    fn relay_keys_are_rsa_2048_and_keep_coming() {
        for _ in 0..3 {
            let key = super::relay_key().expect("a key within the wait");
            let k = openssl::pkey::PKey::private_key_from_pkcs8(key.secret_pkcs8_der()).unwrap();
            assert_eq!((k.id(), k.bits()), (openssl::pkey::Id::RSA, 2048));
            rcgen::KeyPair::try_from(&key).expect("rcgen signs with it");
        }
    }
}
