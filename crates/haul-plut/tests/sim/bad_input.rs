//! Bad input is safe: malformed, truncated, forged-sequence, forged-offset, bad-length,
//! foreign-session and replayed datagrams injected both ways are dropped and counted under
//! their reason, never crash either end, and the file still arrives exactly.

use crate::net::{run, Scenario};

#[test]
fn bad_datagrams_are_dropped_counted_and_harmless() {
    for (seed, loss) in [(41, 0.0), (42, 0.02)] {
        let mut s = Scenario::new(seed, 4 << 20);
        s.link.loss = loss;
        s.link.jitter = 2_000_000;
        s.attack = 0.2;
        let o = run(&s);
        let (r, snd, inj) = (o.receiver, o.sender, o.injected);
        eprintln!("loss {loss}: injected {inj:?}; receiver {r:?}; sender {snd:?}");
        assert!(
            o.completed && o.exact,
            "loss {loss}: transfer corrupted or stalled"
        );
        assert!(
            inj.to_receiver > 100 && inj.replays > 10 && inj.to_sender > 5,
            "too little injected: {inj:?}"
        );
        // Every non-replay injected towards the receiver is dropped under a reason.
        assert_eq!(
            r.malformed + r.foreign + r.forged,
            inj.to_receiver,
            "receiver drop counters"
        );
        assert!(r.malformed > 0 && r.foreign > 0 && r.forged > 0);
        assert!(r.duplicates > 0, "replays were not seen as duplicates");
        // No ACK jitter or loss: every injected ACK is dropped (as malformed, foreign, forged,
        // or stale when it is not newer than the real ACK it copies).
        assert_eq!(
            snd.malformed + snd.foreign + snd.forged + snd.stale,
            inj.to_sender,
            "sender drop counters"
        );
    }
}
