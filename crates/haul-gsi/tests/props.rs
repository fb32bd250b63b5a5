//! Property tests of GSI's parsers of network input: DER pieces, certificate chains, the
//! RFC 2228 framing, grid-mapfiles and signing policies. None may panic, and what is written
//! reads back.

use haul_gsi::der::{children, proxy_cert_info, read_tlv, split_sequences, tlv};
use haul_gsi::{ftp, policy, Gridmap, TrustStore};
use proptest::prelude::*;

proptest! {
    #[test]
    fn der_readers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = read_tlv(&bytes);
        let _ = children(&bytes);
        let _ = split_sequences(&bytes);
        let _ = proxy_cert_info(&bytes);
        let _ = haul_gsi::der::oid_string(&bytes);
    }

    #[test]
    fn written_sequences_split_back(parts in proptest::collection::vec(
        proptest::collection::vec(any::<u8>(), 0..300), 0..6)) {
        let written: Vec<Vec<u8>> = parts.iter().map(|p| tlv(0x30, p)).collect();
        let joined = written.concat();
        let back = split_sequences(&joined).expect("whole sequences");
        prop_assert_eq!(back.len(), written.len());
        for (b, w) in back.iter().zip(&written) {
            prop_assert_eq!(*b, &w[..]);
        }
    }

    #[test]
    fn chains_of_garbage_are_refused_without_panic(certs in proptest::collection::vec(
        proptest::collection::vec(any::<u8>(), 0..400), 0..4)) {
        let slices: Vec<&[u8]> = certs.iter().map(Vec::as_slice).collect();
        let r = haul_gsi::chain::verify(&slices, &TrustStore::default(), 0, 10);
        prop_assert!(r.is_err());
    }

    #[test]
    fn tokens_round_trip_and_garbage_is_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..2048), text in ".{0,200}") {
        prop_assert_eq!(ftp::decode(&ftp::encode(&bytes)).unwrap(), bytes);
        let _ = ftp::decode(&text);
        let _ = ftp::protected_command(&text);
        let _ = ftp::protected_reply(&text);
    }

    #[test]
    fn gridmap_and_policy_parsers_never_panic(text in "[ -~\t\n\"\\\\]{0,400}") {
        let _ = Gridmap::parse(&text);
        let _ = policy::SigningPolicy::parse(&text);
    }

    #[test]
    fn mapped_subjects_map_as_written(
        cns in proptest::collection::vec("[A-Za-z0-9 .\"-]{1,20}", 1..5),
        account in "[a-z][a-z0-9_]{0,10}",
    ) {
        let mut text = String::new();
        for cn in &cns {
            let quoted = cn.replace('\\', "\\\\").replace('"', "\\\"");
            text.push_str(&format!("\"/O=Grid/CN={quoted}\" {account}\n"));
        }
        let map = Gridmap::parse(&text).unwrap();
        for cn in &cns {
            let id = format!("/O=Grid/CN={cn}");
            prop_assert_eq!(map.map(&id, ":globus-mapping:"), Some(account.clone()));
        }
        prop_assert_eq!(map.map("/O=Nobody", ""), None);
    }

    #[test]
    fn globs_match_themselves_and_star_matches_all(s in "[ -)+-~]{0,40}") {
        prop_assert!(policy::glob_match(&s.replace('?', "x"), &s.replace('?', "x")));
        prop_assert!(policy::glob_match("*", &s));
    }
}
