/tmp/send-bench-bin/haul cp -r --transport plut --json ftp://10.78.0.1:2811/f-67108864.bin /var/tmp/send-netem-dst/cp-plut-r1/f-67108864.bin --history /tmp/send-netem-scratch/chain-cp-plut-r1.sqlite
