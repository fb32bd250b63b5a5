//! The rustls side of GSI: TLS 1.2 only (the Globus GSSAPI exchanges its delegation and flag
//! bytes right after the handshake, where TLS 1.3's session tickets would interleave), no
//! session resumption, and peer chains checked by [`crate::chain::verify`] instead of
//! webpki, which refuses proxy certificates (their proxyCertInfo extension is critical). Host
//! names are not checked here: the GSS context checks the peer's identity after the handshake,
//! as Globus does.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use ring::signature as sig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::sign::CertifiedKey;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, DistinguishedName, OtherError,
    ServerConfig, SignatureScheme,
};
use x509_parser::prelude::*;

use crate::chain;
use crate::cred::Credential;
use crate::trust::TrustStore;

/// The handshake signature schemes offered and accepted.
const SCHEMES: [SignatureScheme; 8] = [
    SignatureScheme::RSA_PSS_SHA256,
    SignatureScheme::RSA_PSS_SHA384,
    SignatureScheme::RSA_PSS_SHA512,
    SignatureScheme::RSA_PKCS1_SHA256,
    SignatureScheme::RSA_PKCS1_SHA384,
    SignatureScheme::RSA_PKCS1_SHA512,
    SignatureScheme::ECDSA_NISTP256_SHA256,
    SignatureScheme::ECDSA_NISTP384_SHA384,
];

/// How peers are checked: the trust store and the proxy depth limit.
#[derive(Debug, Clone)]
pub struct PeerPolicy {
    /// The trusted CAs.
    pub trust: Arc<TrustStore>,
    /// Most proxies accepted in a peer's chain.
    pub max_proxies: usize,
    /// Chains this policy (or one derived from it) verified lately.
    verified: Arc<Verified>,
}

/// How long a verified chain is remembered.
const REMEMBER_SECS: i64 = 60;
/// How many verified chains are remembered.
const REMEMBER_CHAINS: usize = 32;

/// Chains verified lately. The data connections of a transfer present the same chain again
/// and again (as do the sessions of a client that logs in often), and each check costs
/// signature verifications and certificate parsing; a chain seen again is answered from here.
/// An entry lasts [`REMEMBER_SECS`] at most, never past the chain's own end, and a hit must
/// fit the proxy limit of the policy asking. Reloading the trust store makes a new policy, so
/// a new CRL is never hidden by an old entry.
#[derive(Debug, Default)]
struct Verified(Mutex<VecDeque<Remembered>>);

/// A chain (DER, leaf first), when to forget it (Unix time), and who it proved.
type Remembered = (Vec<Vec<u8>>, i64, chain::Peer);

impl Verified {
    fn get(&self, chain: &[&[u8]], now: i64) -> Option<chain::Peer> {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        seen.retain(|(_, until, _)| *until > now);
        seen.iter()
            .find(|(c, _, _)| c.len() == chain.len() && c.iter().zip(chain).all(|(a, b)| a == b))
            .map(|(_, _, peer)| peer.clone())
    }

    fn put(&self, chain: &[&[u8]], now: i64, peer: &chain::Peer) {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() == REMEMBER_CHAINS {
            seen.pop_front();
        }
        let until = peer.not_after.min(now + REMEMBER_SECS);
        seen.push_back((
            chain.iter().map(|c| c.to_vec()).collect(),
            until,
            peer.clone(),
        ));
    }
}

impl PeerPolicy {
    /// Chains checked against `trust`, with at most `max_proxies` proxies.
    pub fn new(trust: TrustStore, max_proxies: usize) -> PeerPolicy {
        PeerPolicy {
            trust: Arc::new(trust),
            max_proxies,
            verified: Arc::default(),
        }
    }

    /// Checks a presented chain now.
    pub fn verify(&self, chain: &[&[u8]]) -> Result<chain::Peer, chain::ChainError> {
        let now = chain::unix_now();
        if let Some(peer) = self.verified.get(chain, now) {
            if peer.proxies <= self.max_proxies {
                return Ok(peer);
            }
        }
        let peer = chain::verify(chain, &self.trust, now, self.max_proxies)?;
        self.verified.put(chain, now, &peer);
        Ok(peer)
    }

    /// This policy for chains that carry one proxy more than a client's own: the credential a
    /// client delegates (the proxy the acceptor asked for, on top of the client's chain), and
    /// the peers of data channels, where a server acting for a client presents that credential.
    /// Without it, a client at the limit could not delegate.
    pub fn delegated(&self) -> PeerPolicy {
        PeerPolicy {
            trust: self.trust.clone(),
            max_proxies: self.max_proxies.saturating_add(1),
            verified: self.verified.clone(),
        }
    }

    fn check(
        &self,
        ee: &CertificateDer<'_>,
        rest: &[CertificateDer<'_>],
    ) -> Result<(), rustls::Error> {
        let chain: Vec<&[u8]> = std::iter::once(ee.as_ref())
            .chain(rest.iter().map(|c| c.as_ref()))
            .collect();
        self.verify(&chain).map(|_| ()).map_err(|e| {
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(e))))
        })
    }
}

/// Verifies a handshake signature with the public key of `cert`.
fn verify_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    let bad = || rustls::Error::InvalidCertificate(CertificateError::BadSignature);
    let (_, c) = X509Certificate::from_der(cert.as_ref()).map_err(|_| bad())?;
    let alg: &dyn sig::VerificationAlgorithm = match dss.scheme {
        SignatureScheme::RSA_PSS_SHA256 => &sig::RSA_PSS_2048_8192_SHA256,
        SignatureScheme::RSA_PSS_SHA384 => &sig::RSA_PSS_2048_8192_SHA384,
        SignatureScheme::RSA_PSS_SHA512 => &sig::RSA_PSS_2048_8192_SHA512,
        SignatureScheme::RSA_PKCS1_SHA256 => &sig::RSA_PKCS1_2048_8192_SHA256,
        SignatureScheme::RSA_PKCS1_SHA384 => &sig::RSA_PKCS1_2048_8192_SHA384,
        SignatureScheme::RSA_PKCS1_SHA512 => &sig::RSA_PKCS1_2048_8192_SHA512,
        SignatureScheme::ECDSA_NISTP256_SHA256 => &sig::ECDSA_P256_SHA256_ASN1,
        SignatureScheme::ECDSA_NISTP384_SHA384 => &sig::ECDSA_P384_SHA384_ASN1,
        _ => return Err(bad()),
    };
    sig::UnparsedPublicKey::new(alg, &c.public_key().subject_public_key.data)
        .verify(message, dss.signature())
        .map(|()| HandshakeSignatureValid::assertion())
        .map_err(|_| bad())
}

/// Checks a TLS client's chain (this side accepts).
#[derive(Debug)]
struct ClientChecker(PeerPolicy);

impl ClientCertVerifier for ClientChecker {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        ee: &CertificateDer<'_>,
        rest: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.0
            .check(ee, rest)
            .map(|()| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        SCHEMES.to_vec()
    }
}

/// Checks a TLS server's chain (this side initiates).
#[derive(Debug)]
struct ServerChecker(PeerPolicy);

impl ServerCertVerifier for ServerChecker {
    fn verify_server_cert(
        &self,
        ee: &CertificateDer<'_>,
        rest: &[CertificateDer<'_>],
        _name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.0
            .check(ee, rest)
            .map(|()| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        SCHEMES.to_vec()
    }
}

/// Always presents the one credential.
#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl rustls::server::ResolvesServerCert for Fixed {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

impl rustls::client::ResolvesClientCert for Fixed {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certified(cred: &Credential) -> Result<Arc<CertifiedKey>, rustls::Error> {
    let key = provider()
        .key_provider
        .load_private_key(cred.key.clone_key())?;
    Ok(Arc::new(CertifiedKey::new(cred.chain.clone(), key)))
}

/// The TLS side of a GSS acceptor presenting `cred`, requiring a client chain `peers` accepts.
pub fn acceptor_config(
    cred: &Credential,
    peers: &PeerPolicy,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])?
        .with_client_cert_verifier(Arc::new(ClientChecker(peers.clone())))
        .with_cert_resolver(Arc::new(Fixed(certified(cred)?)));
    cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    cfg.send_tls13_tickets = 0;
    Ok(Arc::new(cfg))
}

/// The TLS side of a GSS initiator presenting `cred` (None: no client certificate, which a
/// GSI acceptor refuses) to a server chain `peers` accepts.
pub fn initiator_config(
    cred: Option<&Credential>,
    peers: &PeerPolicy,
) -> Result<Arc<ClientConfig>, rustls::Error> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ServerChecker(peers.clone())));
    let mut cfg = match cred {
        Some(c) => builder.with_client_cert_resolver(Arc::new(Fixed(certified(c)?))),
        None => builder.with_no_client_auth(),
    };
    cfg.resumption = rustls::client::Resumption::disabled();
    cfg.enable_sni = false;
    Ok(Arc::new(cfg))
}
