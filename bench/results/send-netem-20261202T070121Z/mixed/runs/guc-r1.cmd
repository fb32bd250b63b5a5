globus-url-copy -fast -cc 4 -p 4 -pp -r ftp://10.78.0.1:2812/dev/shm/send-bench/mixed/ file:///var/tmp/send-netem-dst/guc-r1/mixed/
