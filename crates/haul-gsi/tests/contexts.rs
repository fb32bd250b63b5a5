//! GSS contexts run against each other in memory: the handshake, the flag byte, delegation,
//! the delegated credential used again, wrap and unwrap, and refusals.

mod common;

use common::*;
use haul_gsi::tls::{acceptor_config, initiator_config};
use haul_gsi::{Context, Credential, PeerPolicy};

/// Runs an initiator against an acceptor to the end; gives both, or the first error.
fn establish(
    client: &Credential,
    server: &Credential,
    policy: &PeerPolicy,
    ssl_compatible: bool,
    delegate: bool,
) -> Result<(Context, Context), haul_gsi::ContextError> {
    let icfg = initiator_config(Some(client), policy).unwrap();
    let acfg = acceptor_config(server, policy).unwrap();
    let (mut ini, mut token) = Context::initiate(
        icfg,
        policy.clone(),
        ssl_compatible,
        delegate.then(|| client.clone()),
    )?;
    let mut acc = Context::accept(acfg, policy.clone(), ssl_compatible)?;
    for _ in 0..10 {
        let a = acc.step(&token)?;
        if acc.is_done() && ini.is_done() {
            break;
        }
        let i = ini.step(&a.token)?;
        token = i.token;
        if acc.is_done() && ini.is_done() && token.is_empty() {
            break;
        }
    }
    assert!(acc.is_done() && ini.is_done(), "{acc:?} {ini:?}");
    Ok((ini, acc))
}

#[test]
fn a_proxy_authenticates_and_messages_pass_both_ways() {
    let ca = Ca::new("Test CA");
    let user = proxy(&ca.user("Test User", 10));
    let host = ca.user("localhost", 11);
    let policy = policy(ca.trust());
    let (mut ini, mut acc) = establish(&user, &host, &policy, false, false).unwrap();
    assert_eq!(acc.peer().unwrap().identity, "/O=Grid/OU=test/CN=Test User");
    assert_eq!(acc.peer().unwrap().proxies, 1);
    assert_eq!(
        ini.peer().unwrap().host_names,
        vec!["localhost".to_string()]
    );
    assert!(acc.take_delegated().is_none());
    let t = ini.wrap(b"RETR /x\r\n").unwrap();
    assert_ne!(&t[..], b"RETR /x\r\n");
    assert_eq!(acc.unwrap(&t).unwrap(), b"RETR /x\r\n");
    let t = acc.wrap(b"226 ok\r\n").unwrap();
    assert_eq!(ini.unwrap(&t).unwrap(), b"226 ok\r\n");
    // A token altered in flight fails.
    let mut t = ini.wrap(b"DELE /y\r\n").unwrap();
    let n = t.len();
    t[n - 1] ^= 1;
    assert!(acc.unwrap(&t).is_err());
}

#[test]
fn delegation_gives_the_acceptor_a_credential_that_acts_as_the_user() {
    let ca = Ca::new("Test CA");
    let user = proxy(&ca.user("Test User", 10));
    let host = ca.user("localhost", 11);
    let policy = policy(ca.trust());
    let (_, mut acc) = establish(&user, &host, &policy, false, true).unwrap();
    let delegated = acc.take_delegated().expect("a delegated credential");
    assert_eq!(delegated.chain.len(), user.chain.len() + 1);
    let peer = policy.verify(&delegated.chain_slices()).unwrap();
    assert_eq!(peer.identity, "/O=Grid/OU=test/CN=Test User");
    assert_eq!(peer.proxies, 2);
    // The delegated credential authenticates on its own, as a data channel would use it,
    // with the TLS stream kept (SSL-compatible: no flag byte).
    let (mut ini, mut acc2) = establish(&delegated, &host, &policy, true, false).unwrap();
    assert_eq!(
        acc2.peer().unwrap().identity,
        "/O=Grid/OU=test/CN=Test User"
    );
    let t = ini.wrap(&[7u8; 40_000]).unwrap();
    assert_eq!(acc2.unwrap(&t).unwrap(), vec![7u8; 40_000]);
}

#[test]
fn a_client_from_an_untrusted_ca_is_refused_in_the_handshake() {
    let ca = Ca::new("Test CA");
    let rogue = Ca::new("Rogue CA");
    let user = proxy(&rogue.user("Test User", 10));
    let host = ca.user("localhost", 11);
    let e = establish(&user, &host, &policy(ca.trust()), false, false).unwrap_err();
    assert!(e.to_string().contains("Rogue CA"), "{e}");
}

#[test]
fn an_expired_proxy_is_refused_in_the_handshake() {
    let ca = Ca::new("Test CA");
    let user = proxy_with(
        &ca.user("Test User", 10),
        now() - 7200,
        now() - 60,
        haul_gsi::proxy::INHERIT_ALL,
    );
    let host = ca.user("localhost", 11);
    let e = establish(&user, &host, &policy(ca.trust()), false, false).unwrap_err();
    assert!(e.to_string().contains("expired"), "{e}");
}

/// At `max_proxies` 1 a one-proxy client still delegates (the delegated credential holds two
/// proxies, one of them the acceptor's own request) and that credential serves on a data
/// channel; a client presenting two proxies is refused.
#[test]
fn a_client_at_the_proxy_limit_can_still_delegate() {
    let ca = Ca::new("Test CA");
    let user = proxy(&ca.user("Test User", 10));
    let host = ca.user("localhost", 11);
    let mut policy = policy(ca.trust());
    policy.max_proxies = 1;
    let (_, mut acc) = establish(&user, &host, &policy, false, true).unwrap();
    let delegated = acc.take_delegated().expect("a delegated credential");
    assert_eq!(
        policy
            .delegated()
            .verify(&delegated.chain_slices())
            .unwrap()
            .proxies,
        2
    );
    establish(&delegated, &host, &policy.delegated(), true, false).unwrap();
    let e = establish(&proxy(&user), &host, &policy, false, true).unwrap_err();
    assert!(e.to_string().contains("too deep"), "{e}");
}

#[test]
fn garbage_tokens_fail_cleanly() {
    let ca = Ca::new("Test CA");
    let host = ca.user("localhost", 11);
    let policy = policy(ca.trust());
    let mut acc = Context::accept(acceptor_config(&host, &policy).unwrap(), policy, false).unwrap();
    assert!(acc.step(b"\x16\x03\x01\x00\x05hello").is_err());
}
