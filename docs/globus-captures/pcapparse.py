#!/usr/bin/env python3
"""Reassemble TCP flows from a loopback pcap; print control dialogue and MODE E block summary."""
import struct, sys, collections
def read_pcap(fn):
    d = open(fn,'rb').read()
    magic = struct.unpack('<I', d[:4])[0]
    assert magic in (0xa1b2c3d4, 0xa1b23c4d), hex(magic)
    linktype = struct.unpack('<I', d[20:24])[0]
    off = 24
    while off + 16 <= len(d):
        ts, tsu, incl, orig = struct.unpack('<IIII', d[off:off+16]); off += 16
        pkt = d[off:off+incl]; off += incl
        yield ts + tsu/1e6, linktype, pkt
def parse(fn):
    flows = collections.OrderedDict()  # (src,sport,dst,dport) -> dict
    events = []
    for t, lt, pkt in read_pcap(fn):
        if lt == 1: ip = pkt[14:]
        elif lt == 113: ip = pkt[16:]
        elif lt == 276: ip = pkt[20:]
        else: ip = pkt[4:] if lt == 0 else pkt
        if ip[0] >> 4 != 4: continue
        ihl = (ip[0] & 15) * 4
        tot = struct.unpack('>H', ip[2:4])[0]
        if ip[9] != 6: continue
        tcp = ip[ihl:tot]
        sp, dp, seq, ack = struct.unpack('>HHII', tcp[:12])
        doff = (tcp[12] >> 4) * 4
        flags = tcp[13]
        payload = tcp[doff:]
        key = (sp, dp)
        f = flows.get(key)
        if f is None:
            f = flows[key] = {'isn': None, 'segs': {}, 'first': t, 'syn': False, 'fin': False, 'synack': False, 'events': []}
        if flags & 2:
            f['isn'] = seq + 1
            if flags & 16: f['synack'] = True
            else: f['syn'] = True; events.append((t, 'SYN', key))
        if flags & 1 and not f['fin']:
            f['fin'] = True; events.append((t, 'FIN', key))
        if flags & 4: events.append((t, 'RST', key))
        if payload:
            f['segs'].setdefault(seq, payload)
            f['events'].append((t, seq, len(payload)))
    for key, f in flows.items():
        isn = f['isn'] if f['isn'] is not None else min(f['segs'] or [0])
        buf = bytearray(); nxt = isn
        for s in sorted(f['segs']):
            p = f['segs'][s]
            if s + len(p) <= nxt: continue
            if s > nxt: buf += b'\0' * (s - nxt); nxt = s  # gap
            buf += p[nxt - s:]; nxt = s + len(p)
        f['data'] = bytes(buf)
    return flows, events
if False:
    flows, events = parse(sys.argv[1])
    ctrl_ports = set(int(x) for x in sys.argv[2].split(',')) if len(sys.argv) > 2 else set()
    for ev in events:
        print('%.6f %s %d->%d' % (ev[0], ev[1], ev[2][0], ev[2][1]))

def modee(data):
    out = []; i = 0
    while i + 17 <= len(data):
        desc = data[i]; cnt, off = struct.unpack('>QQ', data[i+1:i+17])
        if i + 17 + cnt > len(data): out.append((desc, cnt, off)); return out, -1
        out.append((desc, cnt, off)); i += 17 + cnt
    return out, len(data) - i

def flagstr(d):
    n = []
    for b, s in ((0x80,'EOR'),(0x40,'EOF'),(0x20,'SUSP'),(0x10,'RESTART'),(0x08,'EOD'),(0x04,'EODC'),(0x02,'ERRSUSPECT'),(0x01,'RESTARTMARKER?')):
        if d & b: n.append(s)
    return '|'.join(n) or '0'

def main():
    fn = sys.argv[1]
    ctrl = set(int(x) for x in sys.argv[2].split(','))
    flows, events = parse(fn)
    tl = []
    for ev in events:
        tl.append((ev[0], '%s %d->%d' % (ev[1], ev[2][0], ev[2][1])))
    for key, f in flows.items():
        if key[0] in ctrl or key[1] in ctrl:
            d = 'S->C' if key[0] in ctrl else 'C->S'
            srvport = ('%d/c%d' % (key[0], key[1])) if key[0] in ctrl else ('%d/c%d' % (key[1], key[0]))
            isn = f['isn']
            for t, seq, ln in f['events']:
                s = f['data'][seq - isn: seq - isn + ln]
                for line in s.decode('latin1').splitlines():
                    tl.append((t, '[%s] %s %s' % (srvport, d, line)))
    tl.sort(key=lambda x: x[0])
    t0 = tl[0][0] if tl else 0
    for t, s in tl:
        print('%8.4f %s' % (t - t0, s))
    print('==== data flows (MODE E parse) ====')
    for key, f in flows.items():
        if key[0] in ctrl or key[1] in ctrl or not f['data']: continue
        blocks, rest = modee(f['data'])
        print('flow %d->%d bytes=%d syn_by_sender=%s blocks=%d trailing=%d' % (key[0], key[1], len(f['data']), f['syn'], len(blocks), rest))
        sizes = collections.Counter(b[1] for b in blocks if b[0] == 0)
        print('   data-block sizes(desc=0):', dict(sizes.most_common(5)))
        for b in blocks:
            if b[0] != 0: print('   desc=0x%02x(%s) count=%d offset=%d' % (b[0], flagstr(b[0]), b[1], b[2]))
        if len(sys.argv) > 3:
            for b in blocks[:3]: print('   first: desc=0x%02x count=%d offset=%d' % b)
            for b in blocks[-3:]: print('   last: desc=0x%02x count=%d offset=%d' % b)
if __name__ == '__main__': main()
