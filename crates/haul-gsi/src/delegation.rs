//! Globus delegation, the acceptor's half: after the initiator sends `D`, the acceptor makes a
//! new key and sends a certificate request for it (DER); the initiator signs a proxy
//! certificate for that key with its own credential and sends it back (DER, possibly followed
//! by more certificates, which are ignored: the chain is the one the handshake presented). The
//! acceptor then holds a credential that acts as the user: the new proxy, the user's chain and
//! the new key. The key is ECDSA P-256 (Globus signs whatever key the request carries).

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use x509_parser::prelude::*;

use crate::chain::ChainError;
use crate::cred::Credential;
use crate::tls::PeerPolicy;

/// Delegation failed.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    /// The key or request could not be made.
    #[error("delegation: making the key or request: {0}")]
    Make(String),
    /// What came back is not a certificate.
    #[error("delegation: the initiator sent no certificate: {0}")]
    NotACert(String),
    /// The certificate is not for our key.
    #[error("delegation: the delegated certificate is not for the requested key")]
    WrongKey,
    /// The new chain does not check out.
    #[error("delegation: the delegated chain is not valid: {0}")]
    Chain(#[from] ChainError),
}

/// A request sent, waiting for its certificate.
pub struct Pending {
    key: KeyPair,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pending { .. }")
    }
}

/// Makes a key and its certificate request (DER).
pub fn request() -> Result<(Pending, Vec<u8>), DelegationError> {
    let make = |e: rcgen::Error| DelegationError::Make(e.to_string());
    let key = crate::proxy::ec_key().map_err(|e| DelegationError::Make(e.to_string()))?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "proxy");
    params.distinguished_name = dn;
    let csr = params.serialize_request(&key).map_err(make)?;
    Ok((Pending { key }, csr.der().to_vec()))
}

impl Pending {
    /// Builds the delegated credential from the initiator's answer `reply` and the chain it
    /// authenticated with (`peer_chain`, leaf first), and checks the result under `peers`
    /// (which allow it the one proxy more that the delegation adds).
    pub fn assemble(
        self,
        reply: &[u8],
        peer_chain: &[CertificateDer<'static>],
        peers: &PeerPolicy,
    ) -> Result<Credential, DelegationError> {
        let first = crate::der::split_sequences(reply)
            .and_then(|v| v.first().copied())
            .ok_or_else(|| DelegationError::NotACert("not DER".into()))?;
        let (_, cert) = X509Certificate::from_der(first)
            .map_err(|e| DelegationError::NotACert(e.to_string()))?;
        if cert.public_key().raw != self.key.public_key_der().as_slice() {
            return Err(DelegationError::WrongKey);
        }
        let mut chain = vec![CertificateDer::from(first.to_vec())];
        chain.extend(peer_chain.iter().cloned());
        peers
            .delegated()
            .verify(&chain.iter().map(|c| c.as_ref()).collect::<Vec<_>>())?;
        Ok(Credential {
            chain,
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der())),
        })
    }
}
