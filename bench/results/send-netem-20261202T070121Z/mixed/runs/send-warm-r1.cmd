/tmp/send-bench-bin/haul send ftp://10.78.0.1:2811/mixed /var/tmp/send-netem-dst/send-warm-r1/mixed --history /work/main/bench/results/send-netem-20261202T070121Z/mixed/history-warm.sqlite --json
