/tmp/send-bench-bin/haul cp -r --json ftp://10.78.0.1:2811/f-8589934592.bin /var/tmp/send-netem-dst/cp-default-r2/f-8589934592.bin --history /tmp/send-netem-scratch/lossy-cp-default-r2.sqlite
