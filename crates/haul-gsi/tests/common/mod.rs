//! A test PKI: a CA and end-entity certificates from rcgen, proxies from haul-gsi's own proxy
//! maker (rcgen cannot hold a subject with two CNs), all ECDSA P-256.
#![allow(dead_code)]

use std::path::Path;

use haul_gsi::proxy::{make, ProxyRequest, INHERIT_ALL};
use haul_gsi::{Credential, PeerPolicy, TrustStore};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SerialNumber,
    PKCS_ECDSA_P256_SHA256,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Unix time now.
pub fn now() -> i64 {
    haul_gsi::chain::unix_now()
}

/// A CA that can sign end entities.
pub struct Ca {
    pub cert: rcgen::Certificate,
    pub key: KeyPair,
}

pub fn key() -> KeyPair {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap()
}

pub fn pkcs8(k: &KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(k.serialize_der()))
}

fn dn(parts: &[(&str, &str)]) -> rcgen::DistinguishedName {
    let mut dn = rcgen::DistinguishedName::new();
    for (t, v) in parts {
        let ty = match *t {
            "O" => DnType::OrganizationName,
            "OU" => DnType::OrganizationalUnitName,
            _ => DnType::CommonName,
        };
        dn.push(ty, *v);
    }
    dn
}

impl Ca {
    /// A self-signed CA named `/O=Grid/CN=<cn>`.
    pub fn new(cn: &str) -> Ca {
        let mut p = CertificateParams::default();
        p.distinguished_name = dn(&[("O", "Grid"), ("CN", cn)]);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = key();
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// An end entity `/O=Grid/OU=test/CN=<cn>` valid from `from` to `to` (Unix times).
    pub fn issue(&self, cn: &str, serial: u64, from: i64, to: i64) -> Credential {
        let mut p = CertificateParams::default();
        p.distinguished_name = dn(&[("O", "Grid"), ("OU", "test"), ("CN", cn)]);
        p.is_ca = IsCa::NoCa;
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.subject_alt_names = vec![rcgen::SanType::DnsName(cn.try_into().unwrap())];
        p.serial_number = Some(SerialNumber::from(serial));
        p.not_before = time::OffsetDateTime::from_unix_timestamp(from).unwrap();
        p.not_after = time::OffsetDateTime::from_unix_timestamp(to).unwrap();
        let k = key();
        let cert = p.signed_by(&k, &self.cert, &self.key).unwrap();
        Credential {
            chain: vec![cert.der().clone()],
            key: pkcs8(&k),
        }
    }

    /// An end entity valid for a day around now.
    pub fn user(&self, cn: &str, serial: u64) -> Credential {
        self.issue(cn, serial, now() - 3600, now() + 86_400)
    }

    /// A CRL revoking `serials`.
    pub fn crl(&self, serials: &[u64]) -> Vec<u8> {
        let t = time::OffsetDateTime::now_utc();
        let p = rcgen::CertificateRevocationListParams {
            this_update: t - time::Duration::hours(1),
            next_update: t + time::Duration::days(1),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|&s| rcgen::RevokedCertParams {
                    serial_number: SerialNumber::from(s),
                    revocation_time: t - time::Duration::minutes(5),
                    reason_code: None,
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        p.signed_by(&self.cert, &self.key).unwrap().der().to_vec()
    }

    /// A trust store holding this CA.
    pub fn trust(&self) -> TrustStore {
        let mut t = TrustStore {
            dir: "test".into(),
            ..TrustStore::default()
        };
        t.add_anchor(self.cert.der().to_vec(), Path::new("ca.0"))
            .unwrap();
        t
    }
}

/// A proxy of `parent` with a new key, valid from `from` to `to`, with policy `language`.
pub fn proxy_with(parent: &Credential, from: i64, to: i64, language: &[u8]) -> Credential {
    let k = key();
    let spki = k.public_key_der();
    let der = make(&ProxyRequest {
        issuer: parent.chain[0].as_ref(),
        issuer_key: &parent.key,
        spki: &spki,
        not_before: from,
        not_after: to,
        language,
    })
    .unwrap();
    let mut chain = vec![CertificateDer::from(der)];
    chain.extend(parent.chain.iter().cloned());
    Credential {
        chain,
        key: pkcs8(&k),
    }
}

/// An impersonation proxy of `parent` valid for twelve hours.
pub fn proxy(parent: &Credential) -> Credential {
    proxy_with(parent, now() - 300, now() + 12 * 3600, INHERIT_ALL)
}

/// A policy over `trust` with the default proxy limit.
pub fn policy(trust: TrustStore) -> PeerPolicy {
    PeerPolicy::new(trust, haul_gsi::chain::DEFAULT_MAX_PROXIES)
}

/// The chain as byte slices.
pub fn slices(c: &Credential) -> Vec<&[u8]> {
    c.chain_slices()
}
