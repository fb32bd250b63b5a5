//! Credentials: a certificate chain (leaf first) and its private key, read as the Globus tools
//! read them. A proxy file (`X509_USER_PROXY`, else `/tmp/x509up_u<uid>`) holds the proxy
//! certificate, its key, then the rest of the chain; a host credential is a certificate file
//! and a key file (`X509_USER_CERT` / `X509_USER_KEY`, else `/etc/grid-security/hostcert.pem`
//! and `hostkey.pem`). A key file that others than its owner may read is refused, as Globus does.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A credential could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CredError {
    /// A file could not be read.
    #[error("credential {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// What failed.
        reason: String,
    },
    /// A file lacks what it should hold.
    #[error("credential {path}: {what}")]
    Missing {
        /// The file.
        path: String,
        /// What is missing.
        what: String,
    },
    /// The key file is readable by others.
    #[error("credential {path}: the private key may be read by others (mode {mode:o}); chmod 600 or 400 it")]
    Exposed {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
}

/// A certificate chain and its private key.
#[derive(Debug)]
pub struct Credential {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's key.
    pub key: PrivateKeyDer<'static>,
}

impl Clone for Credential {
    fn clone(&self) -> Credential {
        Credential {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, CredError> {
    std::fs::read(path).map_err(|e| CredError::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

fn check_private(path: &Path) -> Result<(), CredError> {
    let meta = std::fs::metadata(path).map_err(|e| CredError::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(CredError::Exposed {
            path: path.display().to_string(),
            mode,
        });
    }
    Ok(())
}

fn certs_of(path: &Path, text: &[u8]) -> Result<Vec<CertificateDer<'static>>, CredError> {
    let chain = rustls_pemfile::certs(&mut &text[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CredError::Read {
            path: path.display().to_string(),
            reason: format!("PEM: {e}"),
        })?;
    if chain.is_empty() {
        return Err(CredError::Missing {
            path: path.display().to_string(),
            what: "no certificate".into(),
        });
    }
    Ok(chain)
}

fn key_of(path: &Path, text: &[u8]) -> Result<PrivateKeyDer<'static>, CredError> {
    rustls_pemfile::private_key(&mut &text[..])
        .map_err(|e| CredError::Read {
            path: path.display().to_string(),
            reason: format!("PEM: {e}"),
        })?
        .ok_or_else(|| CredError::Missing {
            path: path.display().to_string(),
            what: "no private key (an encrypted key must be decrypted first)".into(),
        })
}

impl Credential {
    /// Reads a certificate file (the chain, leaf first) and a key file.
    pub fn load(cert: &Path, key: &Path) -> Result<Credential, CredError> {
        check_private(key)?;
        Ok(Credential {
            chain: certs_of(cert, &read(cert)?)?,
            key: key_of(key, &read(key)?)?,
        })
    }

    /// Reads a proxy file: certificates and key in one file.
    pub fn load_proxy(path: &Path) -> Result<Credential, CredError> {
        check_private(path)?;
        let text = read(path)?;
        Ok(Credential {
            chain: certs_of(path, &text)?,
            key: key_of(path, &text)?,
        })
    }

    /// The host credential's files: `X509_USER_CERT` and `X509_USER_KEY`, else
    /// `/etc/grid-security/hostcert.pem` and `hostkey.pem`.
    pub fn host_paths() -> (PathBuf, PathBuf) {
        let env = |k: &str, d: &str| {
            std::env::var_os(k)
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(d))
        };
        (
            env("X509_USER_CERT", "/etc/grid-security/hostcert.pem"),
            env("X509_USER_KEY", "/etc/grid-security/hostkey.pem"),
        )
    }

    /// The user's proxy file: `X509_USER_PROXY`, else `/tmp/x509up_u<uid>`.
    pub fn proxy_path() -> PathBuf {
        std::env::var_os("X509_USER_PROXY")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                // SAFETY: getuid has no preconditions and cannot fail.
                let uid = unsafe { libc::getuid() };
                PathBuf::from(format!("/tmp/x509up_u{uid}"))
            })
    }

    /// The certificates as byte slices, leaf first.
    pub fn chain_slices(&self) -> Vec<&[u8]> {
        self.chain.iter().map(|c| c.as_ref()).collect()
    }
}
