//! Validation of a GSI certificate chain as a peer presents it (leaf first): any number of
//! proxy certificates (RFC 3820 proxyCertInfo, the GSI-3 draft OID, or the older Globus
//! `CN=proxy` / `CN=limited proxy` form), then an end-entity certificate, then optional
//! intermediate CAs, ending at a CA of the [`TrustStore`]. Each certificate is checked for its
//! signature, its validity period, revocation by its CA's CRL, and the rules of its kind: a
//! proxy's subject is its issuer's plus one CN, it is no CA and it respects every path-length
//! limit above it; the CA that signed the end entity allows that subject in its signing policy.

use x509_parser::prelude::*;

use crate::der::proxy_cert_info;
use crate::name::{last_cn, oneline};
use crate::trust::TrustStore;

/// RFC 3820's proxyCertInfo.
const OID_PCI_RFC: &str = "1.3.6.1.5.5.7.1.14";
/// The GSI-3 draft's proxyCertInfo.
const OID_PCI_DRAFT: &str = "1.3.6.1.4.1.3536.1.222";
/// Globus's limited-proxy policy language.
const OID_LIMITED: &str = "1.3.6.1.4.1.3536.1.1.1.9";

/// Most proxies accepted above an end-entity certificate unless configured otherwise.
pub const DEFAULT_MAX_PROXIES: usize = 10;
/// Most CA certificates between an end entity and a self-signed root.
const MAX_CA_DEPTH: usize = 8;

/// The seconds since the Unix epoch now.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Why a chain was refused. Each names the certificate it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// Nothing was presented.
    #[error("no certificate presented")]
    Empty,
    /// A certificate could not be parsed.
    #[error("certificate {index} of the chain is malformed: {reason}")]
    Malformed {
        /// Its place in the chain, leaf = 0.
        index: usize,
        /// The parser's words.
        reason: String,
    },
    /// Past its end of validity.
    #[error("certificate {subject} expired at {not_after} (Unix time)")]
    Expired {
        /// Its subject.
        subject: String,
        /// When it expired.
        not_after: i64,
    },
    /// Before its start of validity.
    #[error("certificate {subject} is not valid before {not_before} (Unix time)")]
    NotYetValid {
        /// Its subject.
        subject: String,
        /// When it becomes valid.
        not_before: i64,
    },
    /// The signature does not verify with the issuer's key.
    #[error("certificate {subject}: signature does not verify with the key of {issuer}")]
    BadSignature {
        /// Its subject.
        subject: String,
        /// The issuer whose key was tried.
        issuer: String,
    },
    /// The chain does not end at a trusted CA.
    #[error("certificate {subject} was issued by {issuer}, which is not a trusted CA (in {dir})")]
    UnknownCa {
        /// The last certificate's subject.
        subject: String,
        /// Its issuer.
        issuer: String,
        /// The trust directory.
        dir: String,
    },
    /// Revoked by its CA's CRL.
    #[error("certificate {subject} was revoked by {issuer}")]
    Revoked {
        /// Its subject.
        subject: String,
        /// The CA whose CRL lists it.
        issuer: String,
    },
    /// A proxy that breaks a proxy rule.
    #[error("proxy certificate {subject}: {reason}")]
    BadProxy {
        /// Its subject.
        subject: String,
        /// The rule broken.
        reason: String,
    },
    /// More proxies than allowed.
    #[error("proxy chain too deep: {depth} proxies, at most {max} accepted")]
    TooDeep {
        /// Proxies presented.
        depth: usize,
        /// The limit.
        max: usize,
    },
    /// A certificate in CA position that is not a CA.
    #[error("certificate {subject} signs another certificate but is not a CA")]
    NotCa {
        /// Its subject.
        subject: String,
    },
    /// The CA's signing policy does not cover the subject.
    #[error("the signing policy of {ca} does not allow it to sign {subject}")]
    SigningPolicy {
        /// The CA.
        ca: String,
        /// The subject it signed.
        subject: String,
    },
    /// A critical extension haul does not know.
    #[error("certificate {subject} has an unsupported critical extension {oid}")]
    CriticalExtension {
        /// Its subject.
        subject: String,
        /// The extension.
        oid: String,
    },
}

/// A chain that checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The leaf's subject.
    pub subject: String,
    /// The end entity's subject: the identity behind any proxies (grid-mapfile key).
    pub identity: String,
    /// Proxies above the end entity.
    pub proxies: usize,
    /// Whether a limited proxy is among them.
    pub limited: bool,
    /// The earliest end of validity in the chain (Unix time).
    pub not_after: i64,
    /// The leaf's DNS names and IP addresses and, failing those, its CN (for host checks).
    pub host_names: Vec<String>,
}

/// What a certificate is, as far as proxies go.
enum Proxy {
    No,
    Yes {
        path_len: Option<u64>,
        limited: bool,
    },
}

fn parse(index: usize, der: &[u8]) -> Result<X509Certificate<'_>, ChainError> {
    match X509Certificate::from_der(der) {
        Ok(([], c)) => Ok(c),
        Ok(_) => Err(ChainError::Malformed {
            index,
            reason: "trailing bytes".into(),
        }),
        Err(e) => Err(ChainError::Malformed {
            index,
            reason: e.to_string(),
        }),
    }
}

/// Whether `cert` is a limited proxy (RFC 3820 with Globus's limited policy language, or the
/// legacy `CN=limited proxy` form): what it signs must be limited too.
pub(crate) fn is_limited_proxy(cert: &X509Certificate<'_>) -> bool {
    matches!(
        proxy_kind(cert, &oneline(cert.issuer())),
        Ok(Proxy::Yes { limited: true, .. })
    )
}

/// Classifies `cert` (issued by `issuer_subject`) and checks the proxy naming rule.
fn proxy_kind(cert: &X509Certificate<'_>, issuer_subject: &str) -> Result<Proxy, ChainError> {
    let subject = oneline(cert.subject());
    let mut info = None;
    for ext in cert.extensions() {
        let oid = ext.oid.to_id_string();
        if oid == OID_PCI_RFC || oid == OID_PCI_DRAFT {
            info = Some(
                proxy_cert_info(ext.value).ok_or_else(|| ChainError::BadProxy {
                    subject: subject.clone(),
                    reason: "malformed proxyCertInfo".into(),
                })?,
            );
        } else if ext.critical && ext.parsed_extension().unsupported() {
            return Err(ChainError::CriticalExtension { subject, oid });
        }
    }
    let cn = last_cn(cert.subject());
    let legacy = matches!(cn.as_deref(), Some("proxy" | "limited proxy"))
        && subject.len() > issuer_subject.len()
        && crate::name::same_subject(&subject[..issuer_subject.len()], issuer_subject);
    if info.is_none() && !legacy {
        return Ok(Proxy::No);
    }
    let bad = |reason: &str| ChainError::BadProxy {
        subject: subject.clone(),
        reason: reason.to_string(),
    };
    let Some(cn) = cn else {
        return Err(bad("its last name component is not one CN"));
    };
    let expected = format!("{issuer_subject}/CN={cn}");
    if !crate::name::same_subject(&subject, &expected) {
        return Err(bad(&format!(
            "its subject must be its issuer's ({issuer_subject}) plus one CN"
        )));
    }
    if cert.is_ca() {
        return Err(bad("a proxy may not be a CA"));
    }
    Ok(match info {
        Some(i) => Proxy::Yes {
            path_len: i.path_len,
            limited: i.language == OID_LIMITED,
        },
        None => Proxy::Yes {
            path_len: None,
            limited: cn == "limited proxy",
        },
    })
}

fn check_time(cert: &X509Certificate<'_>, now: i64) -> Result<(), ChainError> {
    let v = cert.validity();
    if now > v.not_after.timestamp() {
        return Err(ChainError::Expired {
            subject: oneline(cert.subject()),
            not_after: v.not_after.timestamp(),
        });
    }
    if now < v.not_before.timestamp() {
        return Err(ChainError::NotYetValid {
            subject: oneline(cert.subject()),
            not_before: v.not_before.timestamp(),
        });
    }
    Ok(())
}

fn check_signature(
    cert: &X509Certificate<'_>,
    issuer: &X509Certificate<'_>,
) -> Result<(), ChainError> {
    cert.verify_signature(Some(issuer.public_key()))
        .map_err(|_| ChainError::BadSignature {
            subject: oneline(cert.subject()),
            issuer: oneline(issuer.subject()),
        })
}

/// Checks that `signer` may sign `cert` as a CA (basicConstraints, the CRL, the policy).
fn check_ca_signed(
    cert: &X509Certificate<'_>,
    signer: &X509Certificate<'_>,
    trust: &TrustStore,
) -> Result<(), ChainError> {
    let ca = oneline(signer.subject());
    if !signer.is_ca() {
        return Err(ChainError::NotCa { subject: ca });
    }
    check_signature(cert, signer)?;
    let subject = oneline(cert.subject());
    if trust.is_revoked(&ca, cert.raw_serial()) {
        return Err(ChainError::Revoked {
            subject,
            issuer: ca,
        });
    }
    let policy = trust
        .anchors_named(&ca)
        .find(|a| a.der == signer.as_raw())
        .and_then(|a| a.policy.as_ref());
    if let Some(pats) = policy {
        if !pats.iter().any(|p| crate::policy::glob_match(p, &subject)) {
            return Err(ChainError::SigningPolicy { ca, subject });
        }
    }
    Ok(())
}

/// Climbs from `cert` (already checked up to here) through the trust store to a self-signed CA.
fn climb_to_root(mut cert_der: Vec<u8>, trust: &TrustStore, now: i64) -> Result<(), ChainError> {
    for _ in 0..MAX_CA_DEPTH {
        let cert = parse(0, &cert_der)?;
        let issuer = oneline(cert.issuer());
        if trust.anchors.iter().any(|a| a.der == cert_der) && issuer == oneline(cert.subject()) {
            return Ok(());
        }
        let mut next = None;
        let mut last_err = None;
        for a in trust.anchors_named(&issuer) {
            let ca = parse(0, &a.der)?;
            match check_time(&ca, now).and_then(|()| check_ca_signed(&cert, &ca, trust)) {
                Ok(()) => {
                    next = Some(a.der.clone());
                    break;
                }
                Err(e) => last_err = Some(e),
            }
        }
        match (next, last_err) {
            (Some(n), _) => cert_der = n,
            (None, Some(e)) => return Err(e),
            (None, None) => {
                return Err(ChainError::UnknownCa {
                    subject: oneline(cert.subject()),
                    issuer,
                    dir: trust.dir.clone(),
                })
            }
        }
    }
    Err(ChainError::UnknownCa {
        subject: "(CA chain)".into(),
        issuer: format!("more than {MAX_CA_DEPTH} CAs deep"),
        dir: trust.dir.clone(),
    })
}

/// The leaf's DNS names, or its CN when it has none (Globus host-name checks).
fn host_names(cert: &X509Certificate<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => out.push(d.to_string()),
                GeneralName::IPAddress(ip) => out.extend(ip_text(ip)),
                _ => {}
            }
        }
    }
    if out.is_empty() {
        out.extend(last_cn(cert.subject()));
    }
    out
}

/// An IP address SAN as text (4 or 16 octets).
fn ip_text(octets: &[u8]) -> Option<String> {
    if let Ok(v4) = <[u8; 4]>::try_from(octets) {
        return Some(std::net::Ipv4Addr::from(v4).to_string());
    }
    <[u8; 16]>::try_from(octets)
        .ok()
        .map(|v6| std::net::Ipv6Addr::from(v6).to_string())
}

/// Walks the proxies at the front of `certs` (leaf first), each signed by the next
/// certificate and within every path-length limit above it; gives how many there are and
/// whether one is limited.
fn walk_proxies(certs: &[X509Certificate<'_>]) -> Result<(usize, bool), ChainError> {
    // The proxies, leaf first, each signed by the next certificate.
    let mut proxies = 0;
    let mut limited = false;
    let mut limits: Vec<(usize, u64)> = Vec::new();
    while proxies < certs.len() {
        let c = &certs[proxies];
        let issuer = oneline(c.issuer());
        match proxy_kind(c, &issuer)? {
            Proxy::No => break,
            Proxy::Yes {
                path_len,
                limited: l,
            } => {
                let Some(signer) = certs.get(proxies + 1) else {
                    return Err(ChainError::BadProxy {
                        subject: oneline(c.subject()),
                        reason: "its issuer's certificate was not presented".into(),
                    });
                };
                if oneline(signer.subject()) != issuer {
                    return Err(ChainError::BadProxy {
                        subject: oneline(c.subject()),
                        reason: format!("the next certificate is not its issuer {issuer}"),
                    });
                }
                check_signature(c, signer)?;
                limited |= l;
                if let Some(p) = path_len {
                    limits.push((proxies, p));
                }
                proxies += 1;
            }
        }
    }
    // A proxy at position i with limit p allows at most p proxies below it (positions < i).
    for &(i, p) in &limits {
        if i as u64 > p {
            return Err(ChainError::BadProxy {
                subject: oneline(certs[i].subject()),
                reason: format!("its path length limit {p} allows fewer proxies below it"),
            });
        }
    }
    Ok((proxies, limited))
}

/// Checks the end entity at `certs[ee]` and any CAs presented after it, up to a trusted CA.
fn check_issuers(
    certs: &[X509Certificate<'_>],
    chain: &[&[u8]],
    ee: usize,
    trust: &TrustStore,
    now: i64,
) -> Result<(), ChainError> {
    for j in ee..certs.len() {
        let c = &certs[j];
        if let Some(o) = c.extensions().iter().find(|e| {
            e.critical && e.parsed_extension().unsupported() && {
                let id = e.oid.to_id_string();
                id != OID_PCI_RFC && id != OID_PCI_DRAFT
            }
        }) {
            return Err(ChainError::CriticalExtension {
                subject: oneline(c.subject()),
                oid: o.oid.to_id_string(),
            });
        }
        if let Some(next) = certs.get(j + 1) {
            if oneline(next.subject()) == oneline(c.issuer()) {
                check_ca_signed(c, next, trust)?;
                continue;
            }
        }
        climb_to_root(chain[j].to_vec(), trust, now)?;
        break;
    }
    Ok(())
}

/// Validates `chain` (leaf first) against `trust` at Unix time `now`, allowing at most
/// `max_proxies` proxies.
pub fn verify(
    chain: &[&[u8]],
    trust: &TrustStore,
    now: i64,
    max_proxies: usize,
) -> Result<Peer, ChainError> {
    if chain.is_empty() {
        return Err(ChainError::Empty);
    }
    let certs = chain
        .iter()
        .enumerate()
        .map(|(i, d)| parse(i, d))
        .collect::<Result<Vec<_>, _>>()?;
    for c in &certs {
        check_time(c, now)?;
    }
    let (proxies, limited) = walk_proxies(&certs)?;
    if proxies > max_proxies {
        return Err(ChainError::TooDeep {
            depth: proxies,
            max: max_proxies,
        });
    }
    let Some(ee) = certs.get(proxies) else {
        return Err(ChainError::BadProxy {
            subject: oneline(certs[proxies - 1].subject()),
            reason: "no end-entity certificate follows the proxies".into(),
        });
    };
    check_issuers(&certs, chain, proxies, trust, now)?;
    Ok(Peer {
        subject: oneline(certs[0].subject()),
        identity: oneline(ee.subject()),
        proxies,
        limited,
        not_after: certs
            .iter()
            .map(|c| c.validity().not_after.timestamp())
            .min()
            .unwrap_or(i64::MAX),
        host_names: host_names(&certs[0]),
    })
}
