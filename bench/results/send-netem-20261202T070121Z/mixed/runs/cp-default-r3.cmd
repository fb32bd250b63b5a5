/tmp/send-bench-bin/haul cp -r --json ftp://10.78.0.1:2811/mixed /var/tmp/send-netem-dst/cp-default-r3/mixed --history /tmp/send-netem-scratch/mixed-cp-default-r3.sqlite
