//! Frames the WAN emulator reads from its TUN devices with segmentation offload on: whatever
//! the namespaces' programs send, cutting an offload packet into wire packets never panics,
//! gives packets of the lengths the layout promised, and together they carry the payload once.
#![no_main]

use haul_netem::gso::{Layout, VnetHdr, VNET_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(h) = VnetHdr::parse(data) else {
        return;
    };
    let pkt = &data[VNET_LEN..];
    let Some(lay) = Layout::of(&h, pkt) else {
        return;
    };
    let n = lay.segments();
    assert!(n >= 2);
    let mut wire = 0;
    for i in 0..n {
        let mut out = Vec::new();
        lay.segment(pkt, i, &mut out);
        assert_eq!(out.len(), lay.wire_len(i));
        wire += out.len();
    }
    assert_eq!(wire - (n - 1) * lay.header_len(), pkt.len());
});
