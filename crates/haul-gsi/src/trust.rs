//! The trusted certificate authorities, read from a directory in the layout the Globus tools
//! use (`/etc/grid-security/certificates`, or `X509_CERT_DIR`): `<hash>.N` PEM CA certificates,
//! `<hash>.rN` PEM CRLs and `<hash>.signing_policy` files. Files of other names are ignored.

use std::path::{Path, PathBuf};

use x509_parser::prelude::*;

use crate::policy::SigningPolicy;

/// The trust directory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The directory or a file in it could not be read.
    #[error("trust directory {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// A file is not what its name says.
    #[error("trust directory: {path}: {reason}")]
    Bad {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// No CA certificate was found.
    #[error("trust directory {0}: no CA certificates (<hash>.0 files)")]
    Empty(String),
}

/// One trusted CA certificate.
#[derive(Debug, Clone)]
pub struct Anchor {
    /// The certificate, DER.
    pub der: Vec<u8>,
    /// Its subject, one-line form.
    pub subject: String,
    /// The file it came from.
    pub file: PathBuf,
    /// The subject patterns its signing policy allows, if it has a policy file.
    pub policy: Option<Vec<String>>,
}

/// One CRL whose signature checked out against its CA.
#[derive(Debug, Clone)]
pub struct Crl {
    /// The issuing CA's subject, one-line form.
    pub issuer: String,
    /// Serial numbers revoked (big-endian bytes, leading zeros stripped).
    pub revoked: Vec<Vec<u8>>,
}

/// The trusted CAs and their CRLs.
#[derive(Debug, Clone, Default)]
pub struct TrustStore {
    /// Where it was read from (for messages).
    pub dir: String,
    /// The CA certificates.
    pub anchors: Vec<Anchor>,
    /// The CRLs.
    pub crls: Vec<Crl>,
}

/// Strips leading zero bytes of a serial number.
pub(crate) fn serial_key(raw: &[u8]) -> Vec<u8> {
    let start = raw.iter().position(|&b| b != 0).unwrap_or(raw.len());
    raw[start..].to_vec()
}

fn pem_blocks(path: &Path, text: &[u8], label: &str) -> Result<Vec<Vec<u8>>, TrustError> {
    let mut out = Vec::new();
    for pem in Pem::iter_from_buffer(text) {
        let pem = pem.map_err(|e| TrustError::Bad {
            path: path.display().to_string(),
            reason: format!("PEM: {e}"),
        })?;
        if pem.label == label {
            out.push(pem.contents);
        }
    }
    Ok(out)
}

/// What a file in the trust directory is, by its name.
enum Kind {
    Cert,
    Crl,
    Policy,
}

fn kind_of(name: &str) -> Option<Kind> {
    let (hash, ext) = name.split_once('.')?;
    if hash.len() != 8 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if ext == "signing_policy" {
        return Some(Kind::Policy);
    }
    if let Some(n) = ext.strip_prefix('r') {
        return (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(Kind::Crl);
    }
    (!ext.is_empty() && ext.bytes().all(|b| b.is_ascii_digit())).then_some(Kind::Cert)
}

impl TrustStore {
    /// Where the Globus tools look: `X509_CERT_DIR`, else `/etc/grid-security/certificates`.
    pub fn default_dir() -> PathBuf {
        std::env::var_os("X509_CERT_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/etc/grid-security/certificates"))
    }

    /// Reads the CAs, CRLs and signing policies of `dir`.
    pub fn load_dir(dir: &Path) -> Result<TrustStore, TrustError> {
        let read_err = |path: &Path, source| TrustError::Read {
            path: path.display().to_string(),
            source,
        };
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| read_err(dir, e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        names.sort();
        let mut store = TrustStore {
            dir: dir.display().to_string(),
            ..TrustStore::default()
        };
        let mut policies = SigningPolicy::default();
        let mut crl_ders = Vec::new();
        for path in names {
            let Some(kind) = path.file_name().and_then(|n| n.to_str()).and_then(kind_of) else {
                continue;
            };
            let text = std::fs::read(&path).map_err(|e| read_err(&path, e))?;
            match kind {
                Kind::Cert => {
                    for der in pem_blocks(&path, &text, "CERTIFICATE")? {
                        store.add_anchor(der, &path)?;
                    }
                }
                Kind::Crl => crl_ders.extend(pem_blocks(&path, &text, "X509 CRL")?),
                Kind::Policy => {
                    let p = SigningPolicy::parse(&String::from_utf8_lossy(&text)).map_err(|e| {
                        TrustError::Bad {
                            path: path.display().to_string(),
                            reason: e.to_string(),
                        }
                    })?;
                    policies.entries.extend(p.entries);
                }
            }
        }
        if store.anchors.is_empty() {
            return Err(TrustError::Empty(store.dir));
        }
        for a in &mut store.anchors {
            a.policy = policies
                .patterns_for(&a.subject)
                .map(|v| v.into_iter().map(str::to_string).collect());
        }
        for der in crl_ders {
            store.add_crl(&der);
        }
        Ok(store)
    }

    /// Adds a CA certificate (DER).
    pub fn add_anchor(&mut self, der: Vec<u8>, file: &Path) -> Result<(), TrustError> {
        let (_, cert) = X509Certificate::from_der(&der).map_err(|e| TrustError::Bad {
            path: file.display().to_string(),
            reason: format!("certificate: {e}"),
        })?;
        let subject = crate::name::oneline(cert.subject());
        self.anchors.push(Anchor {
            der: der.clone(),
            subject,
            file: file.to_path_buf(),
            policy: None,
        });
        Ok(())
    }

    /// Adds a CRL (DER) if a trusted CA signed it; a CRL that does not verify is ignored with a
    /// warning (it can neither revoke nor vouch for anything).
    pub fn add_crl(&mut self, der: &[u8]) {
        let Ok((_, crl)) = CertificateRevocationList::from_der(der) else {
            tracing::warn!(dir = %self.dir, "unreadable CRL ignored");
            return;
        };
        let issuer = crate::name::oneline(crl.issuer());
        let signed = self.anchors_named(&issuer).any(|a| {
            X509Certificate::from_der(&a.der)
                .is_ok_and(|(_, ca)| crl.verify_signature(ca.public_key()).is_ok())
        });
        if !signed {
            tracing::warn!(dir = %self.dir, %issuer, "CRL not signed by a trusted CA: ignored");
            return;
        }
        if crl
            .next_update()
            .is_some_and(|t| t.timestamp() < crate::chain::unix_now())
        {
            tracing::warn!(dir = %self.dir, %issuer, "CRL past its next update: still applied");
        }
        let revoked = crl
            .iter_revoked_certificates()
            .map(|r| serial_key(r.raw_serial()))
            .collect();
        self.crls.push(Crl { issuer, revoked });
    }

    /// The anchors whose subject is `subject`.
    pub fn anchors_named<'a>(&'a self, subject: &'a str) -> impl Iterator<Item = &'a Anchor> {
        self.anchors
            .iter()
            .filter(move |a| crate::name::same_subject(&a.subject, subject))
    }

    /// Whether the CA `issuer` revoked the certificate with serial `raw_serial`.
    pub fn is_revoked(&self, issuer: &str, raw_serial: &[u8]) -> bool {
        let key = serial_key(raw_serial);
        self.crls
            .iter()
            .filter(|c| crate::name::same_subject(&c.issuer, issuer))
            .any(|c| c.revoked.contains(&key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_the_globus_layout() {
        assert!(matches!(kind_of("9e4c4476.0"), Some(Kind::Cert)));
        assert!(matches!(kind_of("9e4c4476.12"), Some(Kind::Cert)));
        assert!(matches!(kind_of("9e4c4476.r0"), Some(Kind::Crl)));
        assert!(matches!(
            kind_of("9e4c4476.signing_policy"),
            Some(Kind::Policy)
        ));
        assert!(kind_of("9e4c4476.pem").is_none());
        assert!(kind_of("9e4c447.0").is_none());
        assert!(kind_of("README").is_none());
        assert!(kind_of("9e4c4476.r").is_none());
    }

    #[test]
    fn serial_keys_ignore_leading_zeros() {
        assert_eq!(serial_key(&[0, 0, 1, 2]), vec![1, 2]);
        assert_eq!(serial_key(&[0]), Vec::<u8>::new());
    }
}
