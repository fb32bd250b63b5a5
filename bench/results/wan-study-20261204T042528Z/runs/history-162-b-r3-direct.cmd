/tmp/wan-bin/haul cp -q --json -c 1 -p 1 --history /work/main/bench/results/wan-study-20261204T042528Z/db/r3.sqlite ftp://10.78.1.1:2811/f16M.bin /dev/null
