/tmp/wan-bin/haul cp -q --json -c 1 -p 1 --history /work/main/bench/results/wan-study-20261202T040609Z/db/a.sqlite --route 10.78.7.1:2811 --relay-streams 1 ftp://10.78.2.1:2811/f8M.bin /dev/null
