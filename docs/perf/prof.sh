#!/bin/bash
# A CPU profile of strata's decode on one 2-core slot of the device machine.
C=.carry-cpu; B=/dev/shm/prof; mkdir -p $B; OUT=${OUT:-/tmp/prof-out}; mkdir -p $OUT
gunzip -c $C/strata.gz > $B/strata && chmod +x $B/strata
gcc -O3 -march=native -fopenmp $C/membw.c -o $B/membw
bw() { OMP_NUM_THREADS=2 OMP_PROC_BIND=true taskset -c 0,1 $B/membw 2 | grep membw_read_gbps; }
echo "membw $(bw)"
T0=$(date +%s)
$B/strata synth -config $C/config.json -out $B/ck > $OUT/synth.txt 2>&1; echo "synth rc $? in $(( $(date +%s) - T0 )) s"
GOMAXPROCS=2 taskset -c 0,1 $B/strata generate -model $B/ck -prompt-ids "$(cat $C/ids16.txt)" -n 64 -threads 2 -cpuprofile $OUT/gen.prof 2>&1 | grep -E "^(prefill|decode)"
GOMAXPROCS=2 taskset -c 0,1 $B/strata generate -model $B/ck -prompt-ids "$(cat $C/ids16.txt)" -n 64 -threads 2 2>&1 | grep -E "^(prefill|decode)"
echo "membw $(bw)"
