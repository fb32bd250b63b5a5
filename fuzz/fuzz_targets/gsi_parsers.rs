//! GSI's parsers of network input: certificate chains (any bytes cut into up to four
//! "certificates"), proxyCertInfo, concatenated DER, the RFC 2228 framing, grid-mapfiles and
//! signing policies. Nothing may panic; whole DER sequences split back into exactly the input.
#![no_main]
use libfuzzer_sys::fuzz_target;

use haul_gsi::der::{proxy_cert_info, split_sequences};
use haul_gsi::{ftp, policy, Gridmap, TrustStore};

fuzz_target!(|data: &[u8]| {
    let (&n, rest) = match data.split_first() {
        Some(x) => x,
        None => return,
    };
    let pieces = usize::from(n % 4) + 1;
    let size = rest.len() / pieces;
    let certs: Vec<&[u8]> = (0..pieces)
        .map(|i| {
            &rest[i * size..if i + 1 == pieces {
                rest.len()
            } else {
                (i + 1) * size
            }]
        })
        .collect();
    assert!(haul_gsi::chain::verify(&certs, &TrustStore::default(), 0, 10).is_err());
    let _ = proxy_cert_info(data);
    if let Some(v) = split_sequences(data) {
        assert_eq!(v.concat(), data);
    }
    if let Ok(t) = std::str::from_utf8(data) {
        let _ = Gridmap::parse(t);
        let _ = policy::SigningPolicy::parse(t);
        let _ = ftp::decode(t);
        let _ = ftp::protected_command(t);
        let _ = ftp::protected_reply(t);
    }
});
