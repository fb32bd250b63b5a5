/tmp/send-bench-bin/haul cp -r --tune --json ftp://10.78.0.1:2811/f-8589934592.bin /var/tmp/send-netem-dst/cp-tune-r3/f-8589934592.bin --history /tmp/send-netem-scratch/lossy-cp-tune-r3.sqlite
