//! Property tests of what the client reads from a server's replies: the FEAT reply, a CKSM
//! digest and MLST fact lines; and of the CKSM algorithm name a server reads. Hostile text never
//! panics them, and what the other end writes comes back exactly.

use haul_proto::Reply;
use haul_xfer::checksum::{parse_cksm_reply, Algorithm};
use haul_xfer::control::Features;
use haul_xfer::listing::parse_mlst;
use proptest::prelude::*;

/// Reply lines as a hostile server may write them.
fn lines() -> impl Strategy<Value = Vec<String>> {
    let line = prop_oneof![
        ".*",
        " ?(CKSM|HAUL|PLUT|AUTH|cksm) [A-Za-z0-9:;, -]{0,30}",
        "[ \t]{0,3}[0-9a-fA-F]{0,40}[ \t]{0,3}",
    ];
    prop::collection::vec(line, 1..6)
}

proptest! {
    #[test]
    fn feat_lists_trimmed_upper_case_algorithms(lines in lines()) {
        let f = Features::parse(&Reply::multi(211, lines));
        for a in &f.cksm {
            prop_assert!(!a.is_empty() && a.trim() == a && *a == a.to_ascii_uppercase(), "{:?}", a);
            prop_assert!(!a.contains([';', ',', ':']), "{:?}", a);
            prop_assert!(f.has_cksm(&a.to_ascii_lowercase()));
        }
    }

    /// A server's FEAT as haul and Globus write it gives back every algorithm offered.
    #[test]
    fn feat_reads_offered_algorithms(algs in prop::sample::subsequence(Algorithm::ALL.to_vec(), 0..=4), tls: bool) {
        let offered: String = algs.iter().map(|a| format!("{}:1;", a.name())).collect();
        let mut lines = vec!["Extensions supported".to_string(), " HAUL 1".into(), format!(" CKSM {offered}")];
        if tls {
            lines.push(" AUTH TLS".into());
        }
        lines.push("End.".into());
        let f = Features::parse(&Reply::multi(211, lines));
        prop_assert!(f.haul && !f.plut);
        prop_assert_eq!(f.auth_tls, tls);
        for a in Algorithm::ALL {
            prop_assert_eq!(f.has_cksm(a.name()), algs.contains(&a));
        }
    }

    /// The digest compared with the local one is the reply's hex, whatever its case or padding.
    #[test]
    fn cksm_digest_round_trip(bytes in prop::collection::vec(any::<u8>(), 4..32), upper: bool, pad in "[ \t]{0,2}") {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let shown = if upper { hex.to_ascii_uppercase() } else { hex.clone() };
        prop_assert_eq!(parse_cksm_reply(&Reply::new(213, format!("{pad}{shown}{pad}"))), Some(hex));
    }

    /// Whatever the reply, the digest is one trimmed lower-case line, so it can equal the local
    /// lowercase hex only if the server sent that hex.
    #[test]
    fn cksm_digest_form(lines in lines()) {
        let d = parse_cksm_reply(&Reply::multi(213, lines)).expect("a reply has a line");
        prop_assert!(d.trim() == d && d == d.to_ascii_lowercase() && !d.contains('\n'), "{:?}", d);
    }

    /// MLST facts as a server writes them come back; a directory never has a size.
    #[test]
    fn mlst_round_trip(is_dir: bool, size: u64, name in "/[^\r\n]{0,20}", perm in "[a-z]{0,4}") {
        let kind = if is_dir { "dir" } else { "file" };
        let line = format!(" Type={kind};Size={size};Perm={perm}; {name}");
        prop_assert_eq!(parse_mlst(&line), Some((is_dir, if is_dir { 0 } else { size })));
        prop_assert_eq!(parse_mlst(&format!(" Type=cdir;Size={size}; {name}")), Some((true, 0)));
    }

    #[test]
    fn mlst_never_panics_and_dirs_have_no_size(line in prop_oneof![".*", " ?([A-Za-z.]{1,8}=[^; ]{0,10};){0,5} ?.{0,10}"]) {
        if let Some((true, size)) = parse_mlst(&line) {
            prop_assert_eq!(size, 0);
        }
    }

    /// An algorithm name a client sends parses to the algorithm, in any case; nothing else does.
    #[test]
    fn algorithm_names(s in prop_oneof!["(?i)(md5|adler-?32|crc-?32c|xxh3|xxh128|xxh3-128|xxhc)", ".{0,12}"]) {
        match s.parse::<Algorithm>() {
            Ok(a) => {
                prop_assert_eq!(a.name().parse::<Algorithm>().ok(), Some(a));
                let known = ["MD5", "ADLER32", "ADLER-32", "CRC32C", "CRC-32C", "XXH128", "XXH3", "XXH3-128", "XXHC"];
                prop_assert!(known.contains(&s.to_ascii_uppercase().as_str()), "{:?}", s);
            }
            Err(e) => prop_assert!(e.to_string().contains("unknown checksum algorithm")),
        }
    }
}
