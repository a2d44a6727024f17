#!/bin/bash
# run.sh: the whole GPU measurement in one call (NOTES.md; runs 4 to 8 used
# this script as it grew, under the names run4.sh, run6.sh and run7.sh, in
# git history). From the repository root, with the carry folder C holding
# cuda.test.gz and, if room is left, strata.gz (gzip -9 of the
# CGO_ENABLED=0 -ldflags=-s -w builds) and heldout.txt; flash4.json and
# hf_decode.py are read from this folder:
#   bash compute/cuda/gpu/run.sh C
# (the device machine gets a copy of the checkout the session runs from: C
# must be an ignored folder of that checkout, named in carry, and the
# tracked files plus C must stay under 64 MiB.)
# Stages, each bounded by what is left of BUDGET (240 s): the 4-layer Flash
# checkpoint (none with FLASH4=0) written in the background while the GPU tests run (PDLTEST=1:
# the golden and invariance tests again with programmatic dependent launch,
# STRATA_CUDA_PDL=PDLMODE: 1, or early for SetPDLEarly);
# BenchmarkFlash (decode table, A/B lines, kernel breakdowns at
# PROFILE batches, 8K prefill); with FLASH6=1 a 6-layer checkpoint's
# decode table and the 43-layer extrapolation (FLASH43 lines), and with
# DEEP=1 too that checkpoint loaded as DEPTH layers (max: as many as the
# device holds; FLASHD lines, FLASHD43 the extrapolation from them; both
# at DEEP_BATCHES, when set, rather than the 4-layer run's batches); the GEMV benchmarks (GEMV=1, GEMV_BENCH the -test.bench pattern); gemmx
# against run 8's fast products (GEMMX=1); what an L2 prefetch buys a
# product (PREFETCH=1); ncu on the T = 1 FP8 products (NCU=1) and on a
# batch-1 step's kernels (NCU_FLASH=1, NCU_K); perplexity
# against the CPU (PPL=1, needs C/heldout.txt); HF transformers (HF=1; with
# FLASH6=1 and HF6=1 on the 6-layer checkpoint too, for HF at 43 layers).
# Logs go to $OUT (in logs.tgz at the end), a summary is printed last and
# kept in $OUT/summary.txt.
set -u
C=$(cd "${1:?carry folder}" && pwd)
G=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/strata-out}
mkdir -p "$OUT"
T0=$(date +%s)
left() { local n=$((T0 + ${BUDGET:-240} - $(date +%s) - ${1:-0})); [ $n -lt 10 ] && n=10; echo $n; }
# atleast N M: left N, but no less than M (the GPU tests take ~80 s: run 25
# call 3's BUDGET=200 left them 50 s, and the timeout killed them unread).
atleast() { local n=$(left $1); [ $n -lt $2 ] && n=$2; echo $n; }
stage() { echo "== $1 at +$(($(date +%s) - T0))s" | tee -a "$OUT/stages.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used,memory.total --format=csv > "$OUT/smi.txt" 2>&1
B=/tmp/strata-bin
mkdir -p $B && gunzip -c "$C/cuda.test.gz" > $B/cuda.test && chmod +x $B/cuda.test
[ -f "$C/strata.gz" ] && gunzip -c "$C/strata.gz" > $B/strata && chmod +x $B/strata
CK=/tmp/strata-flash4
stage synth
# The checkpoint: cuda.test's TestSynthFlash (the working tree that
# travels leaves no room for strata.gz beside it), or strata synth.
# FLASH4=0: no 4-layer checkpoint and no BenchmarkFlash on it (a short
# call for FLASH6/DEEP).
SYN=
if [ "${FLASH4:-1}" = 1 ]; then
	if [ -f "$C/strata.gz" ]; then
		( "$B/strata" synth -config "$G/flash4.json" -out $CK > "$OUT/synth.log" 2>&1; echo "synth rc=$? at +$(($(date +%s) - T0))s" >> "$OUT/synth.log" ) &
	else
		( STRATA_FLASH_SYNTH=$CK "$B/cuda.test" -test.run '^TestSynthFlash$' -test.v > "$OUT/synth.log" 2>&1; echo "synth rc=$? at +$(($(date +%s) - T0))s" >> "$OUT/synth.log" ) &
	fi
	SYN=$!
fi
# FLASH6=1: a 6-layer checkpoint of the Flash pattern beside it (layers 4
# and 5: a CSA and an HCA layer with scored routing, the kind of 39 of the
# released 43), whose decode table less the 4-layer one gives a layer's
# marginal step time for the 43-layer extrapolation (summary).
CK6=/tmp/strata-flash6
if [ "${FLASH6:-0}" = 1 ]; then
	( STRATA_FLASH_LAYERS=6 STRATA_FLASH_SYNTH=$CK6 "$B/cuda.test" -test.run '^TestSynthFlash$' -test.v > "$OUT/synth6.log" 2>&1; echo "synth6 rc=$? at +$(($(date +%s) - T0))s" >> "$OUT/synth6.log" ) &
	SYN6=$!
fi

stage tests
[ "${TESTS:-1}" = 1 ] && timeout $(atleast 150 100) "$B/cuda.test" -test.v -test.timeout 200s \
	-test.run "${TESTS_RUN:-TestBackend|TestMatMul|TestRMSNorm|TestRoPE|TestSoftmax|TestTopK|TestGather|TestGEMV2Split|TestGEMVVariants|TestGEMV5|TestKernelsOpenWithPDLWait|TestHandOff|TestDeviceMemory|TestEventsAndGraph|TestBranches|TestGEMVX|TestGEMVP|TestGEMVXP|TestGEMVH}" \
	> "$OUT/tests.log" 2>&1
echo "tests rc=$?" >> "$OUT/tests.log"
if [ "${PDLTEST:-0}" = 1 ]; then
	stage tests-pdl
	STRATA_CUDA_PDL=${PDLMODE:-1} timeout $(left 120) "$B/cuda.test" -test.v -test.timeout 200s \
		-test.run 'TestBackendGolden|TestBackendInvariance|TestBackendCacheFormats|TestBackendBatched' \
		> "$OUT/tests-pdl.log" 2>&1
	echo "tests-pdl rc=$?" >> "$OUT/tests-pdl.log"
fi

stage wait-synth
[ -n "$SYN" ] && wait $SYN
if [ "${FLASH4:-1}" = 1 ]; then
	stage flash
	STRATA_FLASH_DIR=$CK STRATA_FLASH_PROFILE=${PROFILE:-1,8,64} STRATA_FLASH_PROFILE_GX=${PROFILE_GX:-} STRATA_FLASH_PROFILE_H=${PROFILE_H:-} timeout $(left 60) "$B/cuda.test" -test.run '^$' -test.bench 'BenchmarkFlash$' -test.benchtime 1x -test.timeout 300s \
		> "$OUT/flash.log" 2>&1
	echo "flash rc=$?" >> "$OUT/flash.log"
fi

if [ "${FLASH6:-0}" = 1 ]; then
	stage flash6
	wait $SYN6
	CTX6=4096
	[ "${DEEP:-0}" = 1 ] && CTX6=4096,65536
	STRATA_FLASH_DIR=$CK6 STRATA_FLASH_LAYERS=6 STRATA_FLASH_CONTEXTS=$CTX6 STRATA_FLASH_BATCHES=${DEEP_BATCHES:-${STRATA_FLASH_BATCHES:-1,8,64,256}} STRATA_FLASH_AB=none STRATA_FLASH_PREFILL=0 STRATA_FLASH_PROFILE=none \
		timeout $(left 30) "$B/cuda.test" -test.run '^$' -test.bench 'BenchmarkFlash$' -test.benchtime 1x -test.timeout 300s \
		> "$OUT/flash6.log" 2>&1
	echo "flash6 rc=$?" >> "$OUT/flash6.log"
	if [ "${DEEP:-0}" = 1 ]; then
		# The 6-layer checkpoint as DEPTH layers, layers 4-5 repeated
		# (deepseekv4.LoadDeep: each layer in its own device memory):
		# the issue's "as many layers as fit", measured, not extrapolated.
		stage deep
		STRATA_FLASH_DIR=$CK6 STRATA_FLASH_LAYERS=6 STRATA_FLASH_DEPTH=${DEPTH:-max} STRATA_FLASH_CONTEXTS=$CTX6 STRATA_FLASH_BATCHES=${DEEP_BATCHES:-${STRATA_FLASH_BATCHES:-1,8,64,256}} STRATA_FLASH_AB=none STRATA_FLASH_PREFILL=0 STRATA_FLASH_PROFILE=none \
			timeout $(left 25) "$B/cuda.test" -test.run '^$' -test.bench 'BenchmarkFlash$' -test.benchtime 1x -test.timeout 400s \
			> "$OUT/deep.log" 2>&1
		echo "deep rc=$?" >> "$OUT/deep.log"
	fi
fi
if [ "${GEMV:-1}" = 1 ]; then
	stage gemv
	timeout $(left 15) "$B/cuda.test" -test.run '^$' -test.bench "${GEMV_BENCH:-BenchmarkGEMVVariants|BenchmarkGEMVGrouped}" -test.benchtime 1x -test.timeout 300s \
		> "$OUT/gemv.log" 2>&1
	echo "gemv rc=$?" >> "$OUT/gemv.log"
fi
if [ "${NCU:-0}" = 1 ]; then
	# Nsight Compute on the T = 1 FP8 products (gemv2 against gemvp) and
	# the BF16 one beside them: DRAM throughput, issue, stalls, and L1
	# wavefronts (the activations' loads). Firecracker machines only.
	stage ncu
	NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
	timeout $(left 15) "$NCUB" --clock-control none -k 'regex:^(gemv2_fp8_t1_s1|gemvp_fp8_u2s4_s1|gemvp_fp8_u2s3_s1|gemv2_bf16_t1_s1)$' -c 8 \
		--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
		"$B/cuda.test" -test.run '^$' -test.bench 'BenchmarkGEMVVariants/(fp8-e4m3-4096x8192|bf16-4096x4096)$' -test.benchtime 1x \
		> "$OUT/ncu.log" 2>&1
	echo "ncu rc=$?" >> "$OUT/ncu.log"
fi
if [ "${NCU_FLASH:-0}" = 1 ]; then
	# Nsight Compute on the kernels of one batch-1 decode step of the
	# Flash checkpoint (NCU_K, a regex: by default the attention's), the
	# first NCU_C launches (12: 4 layers of 3); NCU_TC_MINT=1 has attn_tc
	# take one token too.
	stage ncu-flash
	NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
	# The warps' stall reasons (percent of active warp cycles), the issue
	# rate and the tensor pipe.
	ST=sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
	for r in long_scoreboard short_scoreboard wait barrier math_pipe_throttle mio_throttle lg_throttle not_selected selected dispatch_stall tex_throttle no_instruction branch_resolving; do
		ST=$ST,smsp__warp_issue_stalled_${r}_per_warp_active.pct
	done
	STRATA_FLASH_DIR=$CK STRATA_FLASH_MOE_MINPT=${NCU_MINPT:-0} STRATA_FLASH_MOEH=${NCU_MOEH:-0} STRATA_FLASH_ATTN_TC_MINT=${NCU_TC_MINT:-0} STRATA_FLASH_BATCHES=${NCU_B:-1} STRATA_FLASH_CONTEXTS=4096 STRATA_FLASH_AB=none STRATA_FLASH_PREFILL=0 STRATA_FLASH_PROFILE=1 \
		timeout $(left 15) "$NCUB" --clock-control none -k "regex:^(${NCU_K:-attn_logits|attn_values|attn_combine})" -c ${NCU_C:-12} \
		--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis --section InstructionStats \
		--metrics "$ST" ${NCU_SRC:+--section SourceCounters --import-source no -o /tmp/strata-ncu-flash -f} "$B/cuda.test" -test.run '^$' -test.bench 'BenchmarkFlash$' -test.benchtime 1x -test.timeout 300s \
		> "$OUT/ncu-flash.log" 2>&1
	echo "ncu-flash rc=$?" >> "$OUT/ncu-flash.log"
	if [ -n "${NCU_SRC:-}" ]; then
		# NCU_SRC=1: the report's pages read back, details and (SASS, per
		# instruction: executions and stall samples) source, as CSV.
		"$NCUB" -i /tmp/strata-ncu-flash.ncu-rep --page details >> "$OUT/ncu-flash.log" 2>&1
		"$NCUB" -i /tmp/strata-ncu-flash.ncu-rep --page source --csv --print-source sass 2>&1 | gzip -c > "$OUT/ncu-src.csv.gz"
		echo "ncu-src rc=$?" >> "$OUT/ncu-flash.log"
	fi
fi
if [ "${NCU_T:-0}" = 1 ]; then
	# Every kernel's duration (Nsight Compute, one metric, caches and
	# clocks left alone) over the first NCU_TC launches of BenchmarkFlash
	# at batch 1, 4K context (NCU_CTX): its first decode steps (direct, then the
	# graphs' replays; gpu/steps.py splits them at each embed_bf16).
	stage ncu-t
	NCUB=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
	STRATA_FLASH_DIR=$CK STRATA_FLASH_ATTN_TC_MINT=${NCU_TC_MINT:-0} STRATA_FLASH_BATCHES=1 STRATA_FLASH_CONTEXTS=${NCU_CTX:-4096} STRATA_FLASH_AB=none STRATA_FLASH_PREFILL=0 STRATA_FLASH_PROFILE=1 \
		timeout $(left 15) "$NCUB" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv -c ${NCU_TC:-700} \
		"$B/cuda.test" -test.run '^$' -test.bench 'BenchmarkFlash$' -test.benchtime 1x -test.timeout 300s \
		> "$OUT/ncu-t.log" 2>&1
	echo "ncu-t rc=$?" >> "$OUT/ncu-t.log"
fi
if [ "${NSYS:-0}" = 1 ]; then
	# Nsight Systems on decode steps of the Flash checkpoint at NSYS_B
	# (1,8): every kernel of the graphs (--cuda-graph-trace=node) with its
	# stream, start and end, as nsys-trace.csv.gz (gaps and the critical
	# path of a step; gpu/steps.py reads it).
	stage nsys
	NSYSB=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
	echo "nsys: $NSYSB" > "$OUT/nsys.log"
	STRATA_FLASH_DIR=$CK STRATA_FLASH_ATTN_TC_MINT=${NCU_TC_MINT:-0} STRATA_FLASH_BATCHES=${NSYS_B:-1,8} STRATA_FLASH_CONTEXTS=4096 STRATA_FLASH_AB=none STRATA_FLASH_PREFILL=0 STRATA_FLASH_PROFILE=1 \
		timeout $(left 30) "$NSYSB" profile -t cuda --cuda-graph-trace=node -f true -o /tmp/strata-nsys \
		"$B/cuda.test" -test.run '^$' -test.bench 'BenchmarkFlash$' -test.benchtime 1x -test.timeout 300s >> "$OUT/nsys.log" 2>&1
	echo "nsys profile rc=$?" >> "$OUT/nsys.log"
	timeout $(left 10) "$NSYSB" stats -r cuda_gpu_trace -f csv -o /tmp/strata-nsys /tmp/strata-nsys.nsys-rep >> "$OUT/nsys.log" 2>&1
	echo "nsys stats rc=$?" >> "$OUT/nsys.log"
	ls /tmp/strata-nsys* >> "$OUT/nsys.log" 2>&1
	for f in /tmp/strata-nsys*cuda_gpu_trace*.csv; do [ -f "$f" ] && gzip -c "$f" > "$OUT/nsys-trace.csv.gz"; done
fi
if [ "${PREFETCH:-0}" = 1 ]; then
	stage prefetch
	timeout $(left 15) "$B/cuda.test" -test.run '^$' -test.bench "${XBENCH:-BenchmarkPrefetch|BenchmarkGEMVX}" -test.benchtime 1x -test.timeout 300s \
		> "$OUT/prefetch.log" 2>&1
	echo "prefetch rc=$?" >> "$OUT/prefetch.log"
fi
if [ "${GEMMX:-1}" = 1 ]; then
	stage gemmx
	timeout $(left 15) "$B/cuda.test" -test.run '^$' -test.bench 'BenchmarkGEMMX' -test.benchtime 1x -test.timeout 300s \
		> "$OUT/gemmx.log" 2>&1
	echo "gemmx rc=$?" >> "$OUT/gemmx.log"
fi
if [ "${PPL:-0}" = 1 ]; then
	stage perplexity
	timeout $(left 10) "$B/strata" perplexity -model models/strata-kjv -device cuda-fast -compare -max-windows 4 "$C/heldout.txt" \
		> "$OUT/ppl.log" 2>&1
	echo "perplexity rc=$?" >> "$OUT/ppl.log"
fi
if [ "${HF:-0}" = 1 ]; then
	stage hf
	PYTHONUNBUFFERED=1 timeout $(left 0) python3 "$G/hf_decode.py" $CK 24 > "$OUT/hf.log" 2>&1
	echo "hf rc=$?" >> "$OUT/hf.log"
	# (HF6 needs an H200's memory: skipped on a card of less than 100 GB.)
	MEMMB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
	if [ "${FLASH6:-0}" = 1 ] && [ "${HF6:-0}" = 1 ] && [ "${MEMMB:-0}" -ge 100000 ]; then
		# HF on the 6-layer checkpoint (bf16: ~80 GB, an H200's), whose
		# step less the 4-layer one gives HF's marginal layer (HF43 lines).
		stage hf6
		HF_BATCHES=${HF6_BATCHES:-1,8} PYTHONUNBUFFERED=1 timeout $(left 0) python3 "$G/hf_decode.py" $CK6 24 > "$OUT/hf6.log" 2>&1
		echo "hf6 rc=$?" >> "$OUT/hf6.log"
	fi
fi
stage done

if [ -n "${SASS:-}" ]; then
	# The machine code of the kernels matching SASS (a regex) from the
	# kernel cache the runs above filled, and its opcodes counted.
	stage sass
	CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)
	for f in $(find "${XDG_CACHE_HOME:-$HOME/.cache}/strata/cuda" -type f 2>/dev/null); do
		"$CUOBJ" -sass "$f" 2>/dev/null | awk -v re="$SASS" '/Function :/ { on = ($0 ~ re) } on' >> "$OUT/sass.txt"
	done
	awk '/Function :/ { fn = $3 } /^ +\/\*[0-9a-f]+\*\// { op = $2; if (op ~ /^@/) op = $3; sub(/\..*/, "", op); n[fn " " op]++ } END { for (k in n) print k, n[k] }' "$OUT/sass.txt" | sort -k1,1 -k3,3nr > "$OUT/sass-ops.txt"
fi

# The device returns few files: the summary, and every log in one archive.
{
echo "================ summary"
cat "$OUT/smi.txt"
tail -2 "$OUT/synth.log"
grep -E "^(--- FAIL|FAIL|ok|PASS)|GOLDEN|INVARIANCE|tests rc|panic" "$OUT/tests.log" | grep -v "^    " | head -40
grep -cE "^    --- PASS|^--- PASS" "$OUT/tests.log" | sed 's/^/tests passed (lines): /'
grep -E "FORMATS|MULTI|FUSED|PDL|BRANCHES|FASTSMALL|MOEH|MOEGEMVX" "$OUT/tests.log" | grep -v "^    " | head -30
[ -f "$OUT/tests-pdl.log" ] && { grep -E "^(--- FAIL|FAIL|ok|PASS)|GOLDEN|INVARIANCE|FORMATS|rc=|panic" "$OUT/tests-pdl.log" | grep -v "^    " | head -30; grep -cE "^    --- PASS|^--- PASS" "$OUT/tests-pdl.log" | sed 's/^/pdl tests passed (lines): /'; }
grep -E "FLASH|rc=|panic|Error|error" "$OUT/flash.log" | grep -vE "FLASH (kernel|regs|launch)" | head -60
if [ -f "$OUT/flash6.log" ]; then
	# A decode-table row at 4K context with graphs.
	ROW='^FLASH \| [0-9]+ \| 4096 \|.*\| true \|$'
	grep -E "$ROW|rc=|panic" "$OUT/flash6.log" | sed 's/^FLASH/FLASH6/'
	# 43 layers = the 4 measured + 39 of layers 4-5's mean (CSA and HCA
	# alternate from layer 4 on), step and floor alike.
	awk -F'|' -v row="$ROW" 'FNR == NR && $0 ~ row { t4[$2 + 0] = $4; f4[$2 + 0] = $6; next }
		$0 ~ row { b = $2 + 0; if (b in t4) {
			l = ($4 - t4[b]) / 2; fl = ($6 - f4[b]) / 2; t = t4[b] + 39 * l; f = f4[b] + 39 * fl
			printf "FLASH43 | batch %d | 4096 | a layer %.4f ms (floor %.4f, %.2fx) | 43 layers %.3f ms, %.0f tokens/s | floor %.3f ms | %.2fx |\n", b, l, fl, (fl > 0 ? l / fl : 0), t, 1e3 * b / t, f, t / f } }' \
		"$OUT/flash.log" "$OUT/flash6.log"
fi
if [ -f "$OUT/deep.log" ]; then
	# The deep model's table, and 43 layers = its N measured + (43 - N)
	# of the mean layer between it and the 6-layer model, at each batch
	# and context.
	ROWC='^FLASH \| [0-9]+ \| [0-9]+ \|.*\| true \|$'
	grep -E "^FLASH (depth|loaded|[0-9]+ layers)|$ROWC|rc=|panic" "$OUT/deep.log" | sed 's/^FLASH/FLASHD/'
	awk -F'|' -v row="$ROWC" 'FNR == 1 { file++ }
		file == 1 && $0 ~ row { k = ($2 + 0) "," ($3 + 0); t6[k] = $4; f6[k] = $6; next }
		file == 2 && /^FLASH [0-9]+ layers/ { split($0, a, " "); n = a[2]; next }
		file == 2 && $0 ~ row && n > 6 { k = ($2 + 0) "," ($3 + 0); if (k in t6) {
			l = ($4 - t6[k]) / (n - 6); fl = ($6 - f6[k]) / (n - 6); t = $4 + (43 - n) * l; g = $6 + (43 - n) * fl
			printf "FLASHD43 | batch %d | %d | %d layers %.3f ms | a layer %.4f ms (floor %.4f, %.2fx) | 43 layers %.3f ms, %.0f tokens/s | floor %.3f ms | %.2fx |\n", $2, $3, n, $4, l, fl, (fl > 0 ? l / fl : 0), t, 1e3 * $2 / t, g, t / g } }' \
		"$OUT/flash6.log" "$OUT/deep.log"
fi
grep "FLASH kernel" "$OUT/flash.log" | awk -F'|' '{ if (n[$1]++ < 16) print }' | head -120
grep "FLASH regs" "$OUT/flash.log" | grep -E "gemmx|_sx|_h16|gemvp|gemvx_moe" | head -40
[ -f "$OUT/ncu-flash.log" ] && grep -E "^  [a-z]|Duration|DRAM Throughput|L2 Cache Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|smsp__|sm__|Issue Slots Busy|Executed Ipc|rc=" "$OUT/ncu-flash.log" | head -120
[ -f "$OUT/ncu.log" ] && grep -E "^  [a-z]|Duration|DRAM Throughput|Memory Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|L1/TEX Hit|Stall|rc=" "$OUT/ncu.log" | head -60
[ -f "$OUT/gemv.log" ] && grep -E "GEMVV|GEMVG|Rows|rc=|panic" "$OUT/gemv.log"
[ -f "$OUT/prefetch.log" ] && grep -E "Prefetch|GEMVX|rc=|panic" "$OUT/prefetch.log"
[ -f "$OUT/gemmx.log" ] && grep -E "GEMMX|rc=|panic" "$OUT/gemmx.log"
[ -f "$OUT/ncu-t.log" ] && { grep -c gpu__time_duration "$OUT/ncu-t.log"; grep "rc=" "$OUT/ncu-t.log"; }
[ -f "$OUT/nsys.log" ] && grep -E "nsys|rc=|rror" "$OUT/nsys.log" | head -12
[ -f "$OUT/ppl.log" ] && grep -E "cache|against|rc=" "$OUT/ppl.log"
[ -f "$OUT/sass-ops.txt" ] && awk '{ if (c[$1]++ < 40) print "SASS", $0 }' "$OUT/sass-ops.txt"
[ -f "$OUT/hf.log" ] && grep -E "^HF|rc=|Error" "$OUT/hf.log" | tail -6
if [ -f "$OUT/hf6.log" ]; then
	grep -E "^HF|rc=|Error" "$OUT/hf6.log" | tail -5 | sed 's/^HF/HF6/'
	# HF at 43 layers: the 4-layer step + 39 of the marginal layer.
	awk '/^HF decode batch [0-9]+: [0-9.]+ ms/ { b = $4 + 0; sub(":", "", b); if (FNR == NR) t4[b] = $5; else if (b in t4) {
		l = ($5 - t4[b]) / 2; printf "HF43 | batch %d | a layer %.3f ms | 43 layers %.1f ms, %.1f tokens/s |\n", b, l, t4[b] + 39 * l, 1e3 * b / (t4[b] + 39 * l) } }' \
		"$OUT/hf.log" "$OUT/hf6.log"
fi
cat "$OUT/stages.log"
} 2>&1 | tee "$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log)
