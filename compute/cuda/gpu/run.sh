#!/bin/bash
# run.sh: the whole GPU measurement in one call (compute/cuda/NOTES.md),
# run from the repository root with the carry folder C holding cuda.test.gz
# and strata.gz (gzip -9 of the CGO_ENABLED=0 builds: the working tree
# that travels is limited), heldout.txt and this folder's files:
#   bash C/run.sh C
# Stages (each bounded by what is left of a 345 s budget): the 4-layer
# Flash checkpoint is written in the background while the GPU tests run;
# then the shipped model's fast-mode perplexity against the CPU;
# BenchmarkFlash (decode table, kernel breakdown, 8K prefill); HF
# transformers on the same checkpoint. Logs go to $OUT; a table is printed
# last.
set -u
C=$(cd "${1:-$(dirname "$0")}" && pwd)
OUT=${OUT:-/tmp/strata-out}
mkdir -p "$OUT"
T0=$(date +%s)
left() { local n=$((T0 + ${BUDGET:-345} - $(date +%s) - ${1:-0})); [ $n -lt 10 ] && n=10; echo $n; }
stage() { echo "== $1 at +$(($(date +%s) - T0))s" | tee -a "$OUT/stages.log"; }
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used,memory.total --format=csv > "$OUT/smi.txt" 2>&1
B=/tmp/strata-bin
mkdir -p $B && gunzip -c "$C/cuda.test.gz" > $B/cuda.test && gunzip -c "$C/strata.gz" > $B/strata && chmod +x $B/cuda.test $B/strata
CK=/tmp/strata-flash4
stage synth
( "$B/strata" synth -config "$C/flash4.json" -out $CK > "$OUT/synth.log" 2>&1; echo "synth rc=$? at +$(($(date +%s) - T0))s" >> "$OUT/synth.log" ) &
SYN=$!

stage tests
timeout $(left 250) "$B/cuda.test" -test.v -test.timeout 200s \
	-test.run 'TestBackend|TestMatMul|TestRMSNorm|TestRoPE|TestSoftmax|TestTopK|TestGather|TestGEMV2Split|TestHandOff|TestDeviceMemory|TestEventsAndGraph' \
	> "$OUT/tests.log" 2>&1
echo "tests rc=$?" >> "$OUT/tests.log"

stage perplexity
timeout $(left 225) "$B/strata" perplexity -model models/strata-kjv -device cuda-fast -compare -max-windows 4 "$C/heldout.txt" \
	> "$OUT/ppl.log" 2>&1
echo "perplexity rc=$?" >> "$OUT/ppl.log"

stage wait-synth
wait $SYN
stage flash
STRATA_FLASH_DIR=$CK timeout $(left 95) "$B/cuda.test" -test.run '^$' -test.bench BenchmarkFlash -test.benchtime 1x -test.timeout 300s \
	> "$OUT/flash.log" 2>&1
echo "flash rc=$?" >> "$OUT/flash.log"

stage hf
timeout $(left 0) python3 "$C/hf_decode.py" $CK 24 > "$OUT/hf.log" 2>&1
echo "hf rc=$?" >> "$OUT/hf.log"
stage done

echo "================ summary"
cat "$OUT/smi.txt"
tail -2 "$OUT/synth.log"
grep -E "^(--- FAIL|FAIL|ok|PASS)|GOLDEN|tests rc|panic" "$OUT/tests.log" | head -40
grep -cE "^    --- PASS|^--- PASS" "$OUT/tests.log" | sed 's/^/tests passed (lines): /'
grep -E "cache|against|rc=" "$OUT/ppl.log"
grep -E "FLASH|rc=|panic|Error|error" "$OUT/flash.log" | grep -v "FLASH kernel |" | head -40
grep "FLASH kernel |" "$OUT/flash.log" | head -16
grep -E "^HF|rc=|Error" "$OUT/hf.log" | tail -8
cat "$OUT/stages.log"
