//! Chain validation against hand-made PKIs: what GSI accepts, and each refusal with its reason.

mod common;

use common::*;
use haul_gsi::chain::{verify, ChainError, DEFAULT_MAX_PROXIES};
use haul_gsi::proxy::INHERIT_ALL;

const USER: &str = "/O=Grid/OU=test/CN=Test User";

#[test]
fn proxies_of_a_trusted_user_are_the_user() {
    let ca = Ca::new("Test CA");
    let user = ca.user("Test User", 10);
    let p1 = proxy(&user);
    let p2 = proxy(&p1);
    let trust = ca.trust();
    for (cred, n) in [(&user, 0), (&p1, 1), (&p2, 2)] {
        let peer = verify(&slices(cred), &trust, now(), DEFAULT_MAX_PROXIES).unwrap();
        assert_eq!(peer.identity, USER);
        assert_eq!(peer.proxies, n);
        assert!(!peer.limited);
        assert!(peer.subject.starts_with(USER));
        assert_eq!(peer.subject.matches("/CN=").count(), 1 + n);
    }
}

#[test]
fn a_limited_proxy_is_marked_limited() {
    let ca = Ca::new("Test CA");
    let user = ca.user("Test User", 10);
    let p = proxy_with(&user, now() - 60, now() + 3600, haul_gsi::proxy::LIMITED);
    let peer = verify(&slices(&p), &ca.trust(), now(), DEFAULT_MAX_PROXIES).unwrap();
    assert!(peer.limited);
}

#[test]
fn what_a_limited_proxy_signs_is_limited() {
    let ca = Ca::new("Test CA");
    let user = ca.user("Test User", 10);
    let limited = proxy_with(&user, now() - 60, now() + 3600, haul_gsi::proxy::LIMITED);
    // Asked for an impersonation proxy, as delegation and session proxies ask.
    for below in [proxy(&limited), limited.session_proxy(3600).unwrap()] {
        let (_, leaf) = x509_parser::parse_x509_certificate(&below.chain[0]).unwrap();
        let pci = leaf
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.14")
            .unwrap();
        assert!(
            pci.value
                .windows(haul_gsi::proxy::LIMITED.len())
                .any(|w| w == haul_gsi::proxy::LIMITED),
            "a limited proxy signed an unlimited one"
        );
        let peer = verify(&slices(&below), &ca.trust(), now(), DEFAULT_MAX_PROXIES).unwrap();
        assert!(peer.limited);
    }
    // And an unlimited proxy still signs unlimited ones.
    let plain = proxy(&user);
    let (_, leaf) = x509_parser::parse_x509_certificate(&plain.chain[0]).unwrap();
    assert!(!leaf.extensions().iter().any(|e| e
        .value
        .windows(haul_gsi::proxy::LIMITED.len())
        .any(|w| w == haul_gsi::proxy::LIMITED)));
}

#[test]
fn an_expired_proxy_is_refused() {
    let ca = Ca::new("Test CA");
    let user = ca.user("Test User", 10);
    let p = proxy_with(&user, now() - 7200, now() - 3600, INHERIT_ALL);
    let e = verify(&slices(&p), &ca.trust(), now(), DEFAULT_MAX_PROXIES).unwrap_err();
    assert!(matches!(e, ChainError::Expired { .. }), "{e}");
    assert!(e.to_string().contains("expired"), "{e}");
}

#[test]
fn a_proxy_from_an_unknown_ca_is_refused() {
    let ca = Ca::new("Test CA");
    let other = Ca::new("Other CA");
    let p = proxy(&other.user("Test User", 10));
    let e = verify(&slices(&p), &ca.trust(), now(), DEFAULT_MAX_PROXIES).unwrap_err();
    match e {
        ChainError::UnknownCa { issuer, .. } => assert_eq!(issuer, "/O=Grid/CN=Other CA"),
        e => panic!("{e}"),
    }
}

#[test]
fn a_revoked_user_is_refused_through_its_proxies() {
    let ca = Ca::new("Test CA");
    let user = ca.user("Test User", 77);
    let p = proxy(&user);
    let mut trust = ca.trust();
    trust.add_crl(&ca.crl(&[5, 77]));
    let e = verify(&slices(&p), &trust, now(), DEFAULT_MAX_PROXIES).unwrap_err();
    assert!(matches!(e, ChainError::Revoked { .. }), "{e}");
    // Another user of the same CA is not affected.
    let ok = proxy(&ca.user("Other User", 78));
    verify(&slices(&ok), &trust, now(), DEFAULT_MAX_PROXIES).unwrap();
    // A CRL signed by another CA revokes nothing.
    let mut trust = ca.trust();
    trust.add_crl(&Ca::new("Test CA").crl(&[77]));
    verify(&slices(&p), &trust, now(), DEFAULT_MAX_PROXIES).unwrap();
}

#[test]
fn a_chain_too_deep_is_refused() {
    let ca = Ca::new("Test CA");
    let mut c = ca.user("Test User", 10);
    for _ in 0..3 {
        c = proxy(&c);
    }
    let e = verify(&slices(&c), &ca.trust(), now(), 2).unwrap_err();
    assert_eq!(e, ChainError::TooDeep { depth: 3, max: 2 });
    verify(&slices(&c), &ca.trust(), now(), 3).unwrap();
}

#[test]
fn malformed_and_tampered_chains_are_refused() {
    let ca = Ca::new("Test CA");
    let p = proxy(&ca.user("Test User", 10));
    let trust = ca.trust();
    // Garbage.
    let e = verify(&[b"not a certificate"], &trust, now(), 9).unwrap_err();
    assert!(matches!(e, ChainError::Malformed { index: 0, .. }), "{e}");
    // A proxy without its issuer.
    let e = verify(&slices(&p)[..1], &trust, now(), 9).unwrap_err();
    assert!(matches!(e, ChainError::BadProxy { .. }), "{e}");
    // A flipped byte in the proxy's signature.
    let mut der = p.chain[0].to_vec();
    let last = der.len() - 3;
    der[last] ^= 0x01;
    let chain = [&der[..], p.chain[1].as_ref()];
    let e = verify(&chain, &trust, now(), 9).unwrap_err();
    assert!(matches!(e, ChainError::BadSignature { .. }), "{e}");
    // A proxy of one user presented with another user's certificate.
    let other = ca.user("Other User", 11);
    let chain = [p.chain[0].as_ref(), other.chain[0].as_ref()];
    let e = verify(&chain, &trust, now(), 9).unwrap_err();
    assert!(matches!(e, ChainError::BadProxy { .. }), "{e}");
    assert!(verify(&[], &trust, now(), 9).is_err());
}

#[test]
fn the_signing_policy_limits_what_a_ca_vouches_for() {
    let ca = Ca::new("Test CA");
    let p = proxy(&ca.user("Test User", 10));
    let mut trust = ca.trust();
    trust.anchors[0].policy = Some(vec!["/O=Grid/OU=elsewhere/*".into()]);
    let e = verify(&slices(&p), &trust, now(), 9).unwrap_err();
    assert!(matches!(e, ChainError::SigningPolicy { .. }), "{e}");
    trust.anchors[0].policy = Some(vec!["/O=Grid/OU=test/*".into()]);
    verify(&slices(&p), &trust, now(), 9).unwrap();
}

#[test]
fn a_not_yet_valid_certificate_is_refused() {
    let ca = Ca::new("Test CA");
    let user = ca.issue("Test User", 10, now() + 3600, now() + 7200);
    let e = verify(&slices(&user), &ca.trust(), now(), 9).unwrap_err();
    assert!(matches!(e, ChainError::NotYetValid { .. }), "{e}");
}

#[test]
fn a_session_proxy_is_the_same_user_one_proxy_deeper_with_a_new_key() {
    let ca = Ca::new("Test CA");
    let user = ca.user("Test User", 10);
    let p = proxy_with(&user, now() - 60, now() + 3600, INHERIT_ALL);
    let s = p.session_proxy(12 * 3600).unwrap();
    assert_eq!(&s.chain[1..], &p.chain[..]);
    let peer = verify(&slices(&s), &ca.trust(), now(), DEFAULT_MAX_PROXIES).unwrap();
    assert_eq!(peer.identity, USER);
    assert_eq!(peer.proxies, 2);
    assert!(
        peer.not_after <= now() + 3600,
        "a session proxy outlives its issuer"
    );
    let (_, leaf) = x509_parser::parse_x509_certificate(&s.chain[0]).unwrap();
    let (_, issuer) = x509_parser::parse_x509_certificate(&p.chain[0]).unwrap();
    assert_ne!(leaf.public_key().raw, issuer.public_key().raw);
    // The key is the certificate's: it makes the certificate of a proxy beneath it.
    let below = proxy(&s);
    verify(&slices(&below), &ca.trust(), now(), DEFAULT_MAX_PROXIES).unwrap();
}

#[test]
fn a_remembered_chain_still_meets_the_depth_limit_of_the_policy_asking() {
    let ca = Ca::new("Test CA");
    let p3 = proxy(&proxy(&proxy(&ca.user("Test User", 10))));
    let base = haul_gsi::PeerPolicy::new(ca.trust(), 2);
    let deeper = base.delegated();
    assert_eq!(deeper.verify(&slices(&p3)).unwrap().proxies, 3);
    assert_eq!(deeper.verify(&slices(&p3)).unwrap().proxies, 3);
    let e = base.verify(&slices(&p3)).unwrap_err();
    assert_eq!(e, ChainError::TooDeep { depth: 3, max: 2 });
}

#[test]
fn a_remembered_chain_is_forgotten_when_it_expires() {
    let ca = Ca::new("Test CA");
    let user = ca.user("Test User", 10);
    let p = proxy_with(&user, now() - 60, now() + 2, INHERIT_ALL);
    let policy = policy(ca.trust());
    policy.verify(&slices(&p)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3100));
    let e = policy.verify(&slices(&p)).unwrap_err();
    assert!(matches!(e, ChainError::Expired { .. }), "{e}");
}
