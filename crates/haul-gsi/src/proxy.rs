//! Making an RFC 3820 proxy certificate: the initiator's half of delegation, and how tests
//! build chains. The issuer's subject is copied byte for byte and one CN is appended, so the
//! new subject is exactly the issuer's plus one CN whatever string types the issuer used (a
//! re-encoding library could not promise that, nor hold the two CNs a proxy's subject has).
//! The certificate is an impersonation proxy (policy language id-ppl-inheritAll; limited when
//! its issuer is a limited proxy, as RFC 3820 and Globus require) with a critical keyUsage of
//! digitalSignature and keyEncipherment, signed with the issuer's key.

use ring::rand::{SecureRandom, SystemRandom};
use rustls::pki_types::PrivateKeyDer;
use rustls::SignatureScheme;
use x509_parser::prelude::*;

use crate::der::{read_tlv, tlv};

/// A proxy could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The issuer certificate or the request could not be read.
    #[error("making a proxy: {0}")]
    Input(String),
    /// The issuer's key could not sign.
    #[error("making a proxy: signing: {0}")]
    Sign(String),
}

fn seq(parts: &[&[u8]]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

/// UTCTime (before 2050) or GeneralizedTime for a Unix time.
pub(crate) fn time(unix: i64) -> Vec<u8> {
    let t = ::time::OffsetDateTime::from_unix_timestamp(unix)
        .unwrap_or(::time::OffsetDateTime::UNIX_EPOCH);
    let (y, mo, d) = (t.year(), u8::from(t.month()), t.day());
    let (h, mi, se) = (t.hour(), t.minute(), t.second());
    if (1950..2050).contains(&y) {
        let t = format!("{:02}{mo:02}{d:02}{h:02}{mi:02}{se:02}Z", y % 100);
        tlv(0x17, t.as_bytes())
    } else {
        let t = format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{se:02}Z");
        tlv(0x18, t.as_bytes())
    }
}

/// What to make.
#[derive(Debug, Clone)]
pub struct ProxyRequest<'a> {
    /// The issuer's certificate (DER): the signer's own leaf.
    pub issuer: &'a [u8],
    /// The issuer's private key.
    pub issuer_key: &'a PrivateKeyDer<'static>,
    /// The new key's SubjectPublicKeyInfo (DER).
    pub spki: &'a [u8],
    /// Validity from (Unix time).
    pub not_before: i64,
    /// Validity until (Unix time); cut to the issuer's own end.
    pub not_after: i64,
    /// The policy language OID's contents (default: id-ppl-inheritAll).
    pub language: &'a [u8],
}

/// id-ppl-inheritAll (1.3.6.1.5.5.7.21.1): an impersonation proxy.
pub const INHERIT_ALL: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 21, 1];

/// Globus's limited-proxy policy language (1.3.6.1.4.1.3536.1.1.1.9).
pub const LIMITED: &[u8] = &[0x2b, 6, 1, 4, 1, 0x9b, 0x50, 1, 1, 1, 9];

/// Four random bytes made a DER INTEGER's minimal positive content: a first byte of 0x80 or
/// more would be negative, and a zero first byte before one under 0x80 is padding, which
/// OpenSSL refuses when it decodes the certificate (Globus then fails the delegation, one
/// time in 256 before this).
fn minimal_positive(mut b: [u8; 4]) -> [u8; 4] {
    b[0] = (b[0] & 0x7f).max(1);
    b
}

/// Builds and signs the proxy certificate (DER).
pub fn make(req: &ProxyRequest<'_>) -> Result<Vec<u8>, ProxyError> {
    let (_, issuer) =
        X509Certificate::from_der(req.issuer).map_err(|e| ProxyError::Input(e.to_string()))?;
    let issuer_name = issuer.subject().as_raw();
    let (name, _) = read_tlv(issuer_name).ok_or_else(|| ProxyError::Input("issuer name".into()))?;
    let mut serial = [0u8; 4];
    SystemRandom::new()
        .fill(&mut serial)
        .map_err(|_| ProxyError::Sign("no randomness".into()))?;
    let serial = minimal_positive(serial);
    let cn = u32::from_be_bytes(serial).to_string();
    let cn_rdn = tlv(
        0x31,
        &seq(&[&tlv(0x06, &[0x55, 0x04, 0x03]), &tlv(0x13, cn.as_bytes())]),
    );
    let subject = tlv(0x30, &[name.value, &cn_rdn].concat());
    let not_after = req.not_after.min(issuer.validity().not_after.timestamp());
    // A limited proxy signs only limited proxies (globus-url-copy delegates limited ones).
    let language = if crate::chain::is_limited_proxy(&issuer) {
        LIMITED
    } else {
        req.language
    };

    let signing = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(req.issuer_key.clone_key())
        .map_err(|e| ProxyError::Sign(e.to_string()))?;
    let signer = signing
        .choose_scheme(&[
            SignatureScheme::RSA_PKCS1_SHA256,
            SignatureScheme::ECDSA_NISTP256_SHA256,
            SignatureScheme::ECDSA_NISTP384_SHA384,
        ])
        .ok_or_else(|| ProxyError::Sign("the issuer's key type cannot sign here".into()))?;
    let alg: Vec<u8> = match signer.scheme() {
        SignatureScheme::RSA_PKCS1_SHA256 => seq(&[
            &tlv(0x06, &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 1, 1, 11]),
            &[0x05, 0x00],
        ]),
        SignatureScheme::ECDSA_NISTP256_SHA256 => {
            seq(&[&tlv(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 4, 3, 2])])
        }
        _ => seq(&[&tlv(0x06, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 4, 3, 3])]),
    };
    let pci = seq(&[
        &tlv(0x06, &[0x2b, 6, 1, 5, 5, 7, 1, 14]),
        &[0x01, 0x01, 0xff],
        &tlv(0x04, &seq(&[&seq(&[&tlv(0x06, language)])])),
    ]);
    let key_usage = seq(&[
        &tlv(0x06, &[0x55, 0x1d, 0x0f]),
        &[0x01, 0x01, 0xff],
        &tlv(0x04, &[0x03, 0x02, 0x05, 0xa0]),
    ]);
    let tbs = seq(&[
        &[0xa0, 0x03, 0x02, 0x01, 0x02],
        &tlv(0x02, &serial),
        &alg,
        issuer_name,
        &seq(&[&time(req.not_before), &time(not_after)]),
        &subject,
        req.spki,
        &tlv(0xa3, &seq(&[&pci, &key_usage])),
    ]);
    let signature = signer
        .sign(&tbs)
        .map_err(|e| ProxyError::Sign(e.to_string()))?;
    let mut bits = vec![0u8];
    bits.extend_from_slice(&signature);
    Ok(seq(&[&tbs, &alg, &tlv(0x03, &bits)]))
}

/// Signs a proxy for the key of the certificate request `csr` (DER), after checking the
/// request's own signature (Globus's `globus_gsi_proxy_sign_req`): valid from five minutes
/// ago for `lifetime` seconds.
pub fn sign_request(
    csr: &[u8],
    issuer: &[u8],
    issuer_key: &PrivateKeyDer<'static>,
    lifetime: i64,
) -> Result<Vec<u8>, ProxyError> {
    let (_, req) = X509CertificationRequest::from_der(csr)
        .map_err(|e| ProxyError::Input(format!("certificate request: {e}")))?;
    req.verify_signature()
        .map_err(|e| ProxyError::Input(format!("certificate request signature: {e}")))?;
    let now = crate::chain::unix_now();
    make(&ProxyRequest {
        issuer,
        issuer_key,
        spki: req.certification_request_info.subject_pki.raw,
        not_before: now - 300,
        not_after: now + lifetime,
        language: INHERIT_ALL,
    })
}

/// A new ECDSA P-256 key.
pub(crate) fn ec_key() -> Result<rcgen::KeyPair, ProxyError> {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|e| ProxyError::Sign(format!("making a key: {e}")))
}

impl crate::cred::Credential {
    /// A proxy of this credential with a new ECDSA P-256 key, valid for `lifetime` seconds
    /// (cut to this credential's own end): the same identity, one proxy deeper. What a client
    /// presents on its data connections, where each handshake signs with the leaf's key: one
    /// RSA signature here instead of one per connection.
    pub fn session_proxy(&self, lifetime: i64) -> Result<crate::cred::Credential, ProxyError> {
        self.proxy_for(ec_key()?, lifetime)
    }

    /// A proxy of this credential for `key` (PKCS#8: RSA or P-256), valid for `lifetime`
    /// seconds (cut to this credential's own end). A relay presents one with an RSA key to a
    /// Globus next hop, which makes the key of a credential delegated to it the size of the
    /// delegator's and cannot make a 256-bit RSA key from a P-256 leaf.
    pub fn proxy_with_key(
        &self,
        key: rustls::pki_types::PrivatePkcs8KeyDer<'static>,
        lifetime: i64,
    ) -> Result<crate::cred::Credential, ProxyError> {
        let key = rcgen::KeyPair::try_from(&key)
            .map_err(|e| ProxyError::Input(format!("the new proxy's key: {e}")))?;
        self.proxy_for(key, lifetime)
    }

    fn proxy_for(
        &self,
        key: rcgen::KeyPair,
        lifetime: i64,
    ) -> Result<crate::cred::Credential, ProxyError> {
        let issuer = self
            .chain
            .first()
            .ok_or_else(|| ProxyError::Input("empty credential".into()))?;
        let now = crate::chain::unix_now();
        let cert = make(&ProxyRequest {
            issuer,
            issuer_key: &self.key,
            spki: &key.public_key_der(),
            not_before: now - 300,
            not_after: now + lifetime,
            language: INHERIT_ALL,
        })?;
        let mut chain = vec![rustls::pki_types::CertificateDer::from(cert)];
        chain.extend(self.chain.iter().cloned());
        Ok(crate::cred::Credential {
            chain,
            key: PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_serials_are_minimal_positive_der() {
        for first in 0..=255u8 {
            for second in [0u8, 0x7f, 0x80, 0xff] {
                let s = minimal_positive([first, second, 1, 2]);
                // Positive, and no padding byte: the first byte is 1..=0x7f.
                assert!((1..=0x7f).contains(&s[0]), "{s:02x?}");
                assert_eq!(s[1..], [second, 1, 2]);
            }
        }
    }

    #[test]
    fn times() {
        assert_eq!(time(0), tlv(0x17, b"700101000000Z"));
        assert_eq!(time(951_782_400), tlv(0x17, b"000229000000Z"));
        assert_eq!(time(2_524_608_000), tlv(0x18, b"20500101000000Z"));
    }
}
