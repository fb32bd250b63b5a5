//! The GSS acceptor of `AUTH GSSAPI` fed hostile tokens (the input cut at each 0xff byte into
//! successive ADAT tokens): every step either answers or fails, never panics, and a failed
//! context stays failed.
#![no_main]
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;

use haul_gsi::tls::acceptor_config;
use haul_gsi::{Context, Credential, PeerPolicy, TrustStore};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

fn setup() -> &'static (Arc<rustls::ServerConfig>, PeerPolicy) {
    static S: OnceLock<(Arc<rustls::ServerConfig>, PeerPolicy)> = OnceLock::new();
    S.get_or_init(|| {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let cred = Credential {
            chain: vec![CertificateDer::from(cert.der().to_vec())],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        };
        let policy = PeerPolicy::new(TrustStore::default(), 10);
        (acceptor_config(&cred, &policy).unwrap(), policy)
    })
}

fuzz_target!(|data: &[u8]| {
    let (cfg, policy) = setup();
    let Ok(mut ctx) = Context::accept(cfg.clone(), policy.clone(), false) else {
        return;
    };
    for token in data.split(|&b| b == 0xff) {
        match ctx.step(token) {
            Ok(s) if s.done => {
                let _ = ctx.unwrap(token);
            }
            Ok(_) => {}
            Err(_) => {
                assert!(ctx.step(b"\x16\x03\x03\x00\x00").is_err() || !ctx.is_done());
                return;
            }
        }
    }
});
