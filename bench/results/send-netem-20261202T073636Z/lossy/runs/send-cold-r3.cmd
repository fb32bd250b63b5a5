/tmp/send-bench-bin/haul send ftp://10.78.0.1:2811/f-8589934592.bin /var/tmp/send-netem-dst/send-cold-r3/f-8589934592.bin --history /tmp/send-netem-scratch/lossy-send-cold-r3.sqlite --json
