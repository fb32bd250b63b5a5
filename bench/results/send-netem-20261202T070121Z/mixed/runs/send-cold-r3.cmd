/tmp/send-bench-bin/haul send ftp://10.78.0.1:2811/mixed /var/tmp/send-netem-dst/send-cold-r3/mixed --history /tmp/send-netem-scratch/mixed-send-cold-r3.sqlite --json
