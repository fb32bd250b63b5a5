//! Fuzzes the option words the server reads: `OPTS RETR` (`RetrOptions::parse`), `OPTS HAUL`
//! (`params::parse_opts`), PLUT session ids (`params::parse_session`) and CKSM algorithm names
//! (`Algorithm::from_str`). What is accepted must lie inside the documented bounds and print to
//! text that parses to the same value; an error must say something.

#![no_main]

use haul_proto::command::RetrOptions;
use haul_transport::plut::params::{format_opts, parse_opts, parse_session};
use haul_xfer::checksum::Algorithm;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    match RetrOptions::parse(&s) {
        Ok(o) => {
            if let Some(p) = o.parallelism {
                assert!((1..=1024).contains(&p), "parallelism {p}");
            }
            let items = s.split(';').filter(|i| !i.trim().is_empty()).count();
            assert_eq!(o.pairs.len(), items, "one pair per option");
            let shown: String = o.pairs.iter().map(|(k, v)| format!("{k}={v};")).collect();
            assert_eq!(RetrOptions::parse(&shown).as_ref(), Ok(&o), "{shown:?}");
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    match parse_opts(&s) {
        Ok(Some(p)) => {
            assert!((548..=65507).contains(&p.mds), "mds {}", p.mds);
            assert!(p.rate >= 1e6 && p.rate.fract() == 0.0, "rate {}", p.rate);
            assert_eq!(parse_opts(&format_opts(&p)), Ok(Some(p)));
        }
        Ok(None) => {}
        Err(e) => assert!(!e.is_empty()),
    }
    if let Ok(id) = parse_session(&s) {
        assert!(
            (1..=16).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit()),
            "{s:?} accepted as a session id"
        );
        assert_eq!(parse_session(&format!("{id:016x}")), Ok(id));
        assert_eq!(parse_session(&format!("{id:x}")), Ok(id));
    }
    if let Ok(a) = s.parse::<Algorithm>() {
        assert_eq!(a.name().parse::<Algorithm>().ok(), Some(a));
        assert_eq!(a.to_string(), a.name());
    }
});
