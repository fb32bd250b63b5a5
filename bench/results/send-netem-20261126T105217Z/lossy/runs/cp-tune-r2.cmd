/tmp/send-bench-bin/haul cp -r --tune --json ftp://10.78.0.1:2811/f-4294967296.bin /var/tmp/send-netem-dst/cp-tune-r2/f-4294967296.bin --history /tmp/send-netem-scratch/lossy-cp-tune-r2.sqlite
