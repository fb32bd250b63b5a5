/tmp/send-bench-bin/haul cp -r --transport plut --json ftp://10.78.0.1:2811/mixed /var/tmp/send-netem-dst/cp-plut-r1/mixed --history /tmp/send-netem-scratch/mixed-cp-plut-r1.sqlite
