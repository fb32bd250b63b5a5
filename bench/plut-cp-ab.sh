#!/bin/bash
# bench/plut-cp-ab.sh OLD NEW [PAIRS] : haul cp --transport plut 1 GiB download and upload over 1gbit 100ms 0.1%,
# old (serve+cp) and new (serve+cp) alternating; prints wall seconds from start to exit.
OLD=$1; NEW=$2; PAIRS=${3:-3}; NET=$NEW
export HAUL_NETEM_STATE=/run/haul-netem-hnr
P=hnr-
$NET netem up --pair --prefix $P --rtt 100ms --rate 1gbit --loss 0.1% >/dev/null || exit 1
A=$($NET netem addr a); B=$($NET netem addr b)
W=/dev/shm/pr; rm -rf $W; mkdir -p $W/srv $W/dst
head -c 1G /dev/urandom > $W/src; touch -d '1 hour ago' $W/src; cp -p $W/src $W/srv/big
for i in $(seq 1 $PAIRS); do
  for v in old new; do
    H=$OLD; [ $v = new ] && H=$NEW
    ip netns exec ${P}b $H serve --root $W/srv --listen $B:2811 --anonymous --anonymous-write >/dev/null 2>&1 &
    SP=$!; sleep 0.5
    for dir in down up; do
      rm -f $W/dst/out $W/srv/up; sync
      t0=$(date +%s.%N)
      if [ $dir = down ]; then
        ip netns exec ${P}a $H cp -q --json --transport plut --plut-rate 1gbit ftp://$B:2811/big $W/dst/out --history $W/h-$v.sqlite > $W/out.json 2>&1
      else
        ip netns exec ${P}a $H cp -q --json --transport plut --plut-rate 1gbit $W/src ftp://$B:2811/up --history $W/h-$v.sqlite > $W/out.json 2>&1
      fi
      rc=$?; t1=$(date +%s.%N)
      ver=$(grep -o '"verified_files": [0-9]*' $W/out.json)
      echo "$v $dir rc=$rc wall_s=$(echo "$t1 - $t0" | bc) $ver"
    done
    kill $SP; wait $SP 2>/dev/null
  done
done
$NET netem down --prefix $P >/dev/null
rm -rf $W
