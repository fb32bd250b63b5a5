globus-url-copy -fast -cc 4 -p 4 -pp ftp://10.78.0.1:2812/dev/shm/send-bench/f-8589934592.bin file:///var/tmp/send-netem-dst/guc-r3/f-8589934592.bin
