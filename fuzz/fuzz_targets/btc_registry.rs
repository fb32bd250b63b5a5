//! `SITE BTC ALL` replies, which a client reads from registries it does not control, and the
//! `SITE BTC` answers a registry caches: no input panics the parser; what it accepts is sane,
//! bounded and writes back to lines that read the same; a registry's cache fed what it read
//! answers within its line bound, every age grown and none past seven days.
#![no_main]

use std::time::{Duration, Instant};

use haul_overlay::registry::{Cache, MAX_LINES};
use haul_proto::btc::{PolledServer, RegistryReply, Reported, Shared, MAX_AGE_S, MAX_SERVER_NAME};
use haul_proto::Reply;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&held, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    let r = RegistryReply::parse(&Reply::multi(211, lines.clone()));
    for s in &r.servers {
        assert!(!s.server.is_empty() && s.server.len() <= MAX_SERVER_NAME);
        assert!(s
            .server
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b';' && b != b'='));
        assert!(s.polled_s.is_finite() && s.polled_s >= 0.0);
        let again = PolledServer::parse(&s.line()).expect("a server line reads back");
        assert_eq!(
            (&again.server, again.addr, again.relays),
            (&s.server, s.addr, s.relays)
        );
    }
    for p in &r.reported {
        let q = &p.prediction;
        assert!(!p.server.is_empty() && p.server.len() <= MAX_SERVER_NAME);
        assert!(q.bps.is_finite() && q.bps >= 0.0 && q.age_s >= 0.0 && !q.peer.is_empty());
        if !q.peer.contains(';') && !q.predictor.contains(';') {
            let again = Reported::parse(&p.line()).expect("a prediction line reads back");
            assert_eq!(
                (&again.server, &again.prediction.peer),
                (&p.server, &q.peer)
            );
        }
    }
    // The same lines as one server's SITE BTC answer, cached and aged `held` seconds.
    let shared = Shared::parse(&Reply::multi(211, lines));
    let t0 = Instant::now();
    let mut c = Cache::new(Duration::from_secs(300));
    c.answered("s:2811", None, shared.clone(), t0);
    let snap = c.snapshot(t0 + Duration::from_secs(u64::from(held)));
    assert!(snap.servers.len() + snap.reported.len() <= MAX_LINES);
    assert_eq!(snap.servers.len(), 1);
    for p in &snap.reported {
        assert!(p.prediction.age_s >= f64::from(held) && p.prediction.age_s <= MAX_AGE_S);
        assert!(shared
            .predictions
            .iter()
            .any(|q| q.peer == p.prediction.peer));
    }
});
