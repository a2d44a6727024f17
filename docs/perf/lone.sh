#!/bin/bash
# Lone decode runs: strata (after) and strata-simd (before, main at dbb78cd)
# on slot 0 (cpus 0,1) with nothing else running, after membw.c on the same
# slot; the checkpoint is the harness's (peertool synth of its config.json).
set -u
OUT=${OUT:-/tmp/lone-out}; mkdir -p $OUT
W=/dev/shm/lone; mkdir -p $W/bin
T0=$(date +%s); t() { echo "[+$(( $(date +%s) - T0 ))s] $*" | tee -a $OUT/timeline.txt; }
xz -dc .peer/bins.tar.xz | tar -x -C $W/bin
gcc -O3 -march=native -fopenmp .peer-tool/membw.c -o $W/bin/membw
bw() { OMP_NUM_THREADS=2 OMP_PROC_BIND=true taskset -c 0,1 $W/bin/membw 2 | grep membw_read_gbps; }
t "membw $(bw)"
$W/bin/peertool-simd synth -config .peer-tool/config.json -out $W/dsv4 -seed 1 > $OUT/synth.txt 2>&1
t "synth rc $?"
$W/bin/peertool-simd floor -model $W/dsv4 -ctx 160 > $OUT/floor.txt 2>&1; t "floor: $(tail -2 $OUT/floor.txt | tr '\n' ' ')"
IDS=$(cut -d, -f1-128 .peer-tool/prompt_ids.txt)
for r in 1 2 3; do
  for b in strata-simd strata; do
    GOMAXPROCS=2 taskset -c 0,1 $W/bin/$b generate -model $W/dsv4 -prompt-ids "$IDS" -n 64 -threads 2 > $OUT/gen_${b}_$r.txt 2>&1
    t "$b rep $r: $(grep -E '^decode' $OUT/gen_${b}_$r.txt)"
  done
done
t "membw $(bw)"
grep -h "greedy_ids\|^decode" $OUT/gen_* | sort | uniq -c | head
