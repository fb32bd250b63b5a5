//! `SITE BTC` and `SITE BTC ALL` lines (what a client reads from servers and registries it does
//! not control) never panic the parser, what it accepts is sane and bounded, and every line a
//! server or registry writes reads back as it was.

use haul_proto::btc::{
    Direction, PeerPrediction, PolledServer, RegistryReply, Reported, MAX_SERVER_NAME,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn any_text_parses_or_is_refused_without_panic(s in "\\PC{0,200}") {
        if let Some(p) = PeerPrediction::parse(&s) {
            prop_assert!(p.bps.is_finite() && p.bps >= 0.0 && p.age_s >= 0.0);
            prop_assert!(!p.peer.is_empty());
        }
    }

    #[test]
    fn a_written_line_reads_back(
        peer in "[0-9a-f:.]{1,39}",
        sent in any::<bool>(),
        bps in 0u64..100_000_000_000,
        age in 0u32..1_000_000,
        samples in 0usize..10_000,
        predictor in "[a-z]{1,8}\\([0-9.s]{1,6}\\)",
        err_tenths in prop::option::of(0u32..100_000),
    ) {
        let p = PeerPrediction {
            peer,
            direction: if sent { Direction::Sent } else { Direction::Received },
            bps: bps as f64,
            predictor,
            age_s: age as f64,
            samples,
            err_pct: err_tenths.map(|e| e as f64 / 10.0),
        };
        prop_assert_eq!(PeerPrediction::parse(&p.line()), Some(p));
    }
}

proptest! {
    #[test]
    fn any_registry_reply_parses_to_sane_lines(lines in prop::collection::vec("\\PC{0,120}", 0..20)) {
        let r = haul_proto::Reply::multi(211, lines);
        let parsed = RegistryReply::parse(&r);
        for s in &parsed.servers {
            prop_assert!(!s.server.is_empty() && s.server.len() <= MAX_SERVER_NAME);
            prop_assert!(s.server.bytes().all(|b| b.is_ascii_graphic() && b != b';' && b != b'='));
            prop_assert!(s.polled_s.is_finite() && s.polled_s >= 0.0);
            let again = PolledServer::parse(&s.line());
            prop_assert!(again.is_some(), "{} does not read back", s.line());
            let again = again.unwrap_or_else(|| s.clone());
            prop_assert!((again.polled_s - s.polled_s).abs() <= 0.5);
            let expected = PolledServer { polled_s: again.polled_s, ..s.clone() };
            prop_assert_eq!(again, expected);
        }
        for p in &parsed.reported {
            prop_assert!(!p.server.is_empty() && p.server.len() <= MAX_SERVER_NAME);
            prop_assert!(p.prediction.bps.is_finite() && p.prediction.bps >= 0.0);
        }
    }

    #[test]
    fn registry_lines_read_back(
        server in "[a-z0-9.-]{1,40}:[0-9]{1,5}",
        ip in any::<std::net::IpAddr>(),
        port in any::<u16>(),
        relays in any::<bool>(),
        polled in 0u32..1_000_000,
        peer in "[0-9a-f:.]{1,39}",
        bps in 0u64..100_000_000_000,
        age in 0u32..1_000_000,
    ) {
        let s = PolledServer { server: server.clone(), addr: Some((ip, port).into()), relays, polled_s: polled as f64 };
        let p = Reported {
            server,
            prediction: PeerPrediction {
                peer,
                direction: Direction::Sent,
                bps: bps as f64,
                predictor: "median".into(),
                age_s: age as f64,
                samples: 3,
                err_pct: None,
            },
        };
        let r = haul_proto::Reply::multi(211, vec!["BTC registry".into(), format!(" {}", s.line()), format!(" {}", p.line()), "End.".into()]);
        prop_assert_eq!(RegistryReply::parse(&r), RegistryReply { servers: vec![s], reported: vec![p] });
    }
}
