/tmp/send-bench-bin/haul cp -r --tune --json ftp://10.78.0.1:2811/mixed /var/tmp/send-netem-dst/cp-tune-r3/mixed --history /tmp/send-netem-scratch/mixed-cp-tune-r3.sqlite
