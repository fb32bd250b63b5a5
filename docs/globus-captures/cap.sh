#!/bin/bash
# usage: cap.sh NAME ctrlports cmd...
name=$1; ports=$2; shift 2
tcpdump -i lo -B 262144 -U -s 0 -w /tmp/gg/cap/$name.pcap tcp 2>/tmp/gg/cap/$name.tcpdump.err & tp=$!
sleep 0.5
"$@" > /tmp/gg/cap/$name.out 2>&1; echo "rc=$?" >> /tmp/gg/cap/$name.out
sleep 2; kill $tp; wait $tp 2>/dev/null
python3 /tmp/gg/pcapparse.py /tmp/gg/cap/$name.pcap $ports v > /tmp/gg/cap/$name.txt
