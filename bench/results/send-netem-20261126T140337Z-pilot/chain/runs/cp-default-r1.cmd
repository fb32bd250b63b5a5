/tmp/send-bench-bin/haul cp -r --json ftp://10.78.0.1:2811/f-67108864.bin /var/tmp/send-netem-dst/cp-default-r1/f-67108864.bin --history /tmp/send-netem-scratch/chain-cp-default-r1.sqlite
