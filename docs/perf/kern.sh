#!/bin/bash
# Kernel bandwidth on one 2-core slot of the device machine, nothing else running.
C=.carry-cpu; B=/dev/shm/kern; mkdir -p $B
gunzip -c $C/cpu.test.gz > $B/cpu.test && chmod +x $B/cpu.test
gcc -O3 -march=native -fopenmp $C/membw.c -o $B/membw
bw() { OMP_NUM_THREADS=2 OMP_PROC_BIND=true taskset -c 0,1 $B/membw 2 | grep membw_read_gbps; }
echo "membw $(bw)"
cd compute/cpu
GOMAXPROCS=2 taskset -c 0,1 $B/cpu.test -test.run XXX -test.bench 'MatMul/.*/.*/T=1/avx512$' -test.benchtime 1s -test.count 1 2>&1 | grep -E "Bench|ok"
echo "membw $(bw)"
