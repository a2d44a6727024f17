package cuda

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/quant"
)

// flashConfig is DeepSeek-V4-Flash's width in the released formats (FP8
// with 128×128 UE8M0 blocks, FP4 experts) with layers of the Flash pattern
// (window, window, CSA 4, HCA 128, ...); %d are the layer count, the
// compress ratios and the routed experts.
const flashConfig = `{
  "model_type": "deepseek_v4", "vocab_size": 129280, "hidden_size": 4096, "num_hidden_layers": %d,
  "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64,
  "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024,
  "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
  "n_routed_experts": %d, "num_experts_per_tok": 6, "moe_intermediate_size": 2048, "n_shared_experts": 1,
  "num_hash_layers": 3, "compress_ratios": [%s], "sliding_window": 128,
  "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
  "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "scoring_func": "sqrtsoftplus",
  "rope_theta": 10000, "compress_rope_theta": 160000,
  "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1},
  "max_position_embeddings": 1048576, "num_nextn_predict_layers": 0, "bos_token_id": 0, "eos_token_id": 1,
  "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
  "expert_dtype": "fp4"
}`

// flashJSON is flashConfig for layers of the Flash pattern (window,
// window, CSA 4, HCA 128, ...) and experts routed experts.
func flashJSON(layers, experts int) string {
	ratios := make([]string, layers)
	for l := range ratios {
		ratios[l] = "0"
		if l >= 2 {
			ratios[l] = []string{"4", "128"}[(l-2)%2]
		}
	}
	return fmt.Sprintf(flashConfig, layers, experts, strings.Join(ratios, ", "))
}

// TestSynthFlash writes BenchmarkFlash's checkpoint (STRATA_FLASH_LAYERS,
// STRATA_FLASH_EXPERTS) into the folder STRATA_FLASH_SYNTH names, so that
// a second process can write it while the tests run (gpu/run.sh); it is
// skipped without the setting.
func TestSynthFlash(t *testing.T) {
	dir := os.Getenv("STRATA_FLASH_SYNTH")
	if dir == "" {
		t.Skip("STRATA_FLASH_SYNTH is not set")
	}
	start := time.Now()
	if err := deepseekv4.WriteSynthetic(dir, []byte(flashJSON(envInt("STRATA_FLASH_LAYERS", 4), envInt("STRATA_FLASH_EXPERTS", 256))), 1); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("FLASH wrote %s in %.1fs\n", dir, time.Since(start).Seconds())
}

// envInt reads an integer setting of the benchmark.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// hbmBytesPerSec is the H200's HBM bandwidth the floors use.
const hbmBytesPerSec = 4.3e12

// BenchmarkFlash times a Flash-width model with random weights on the
// device (fast mode, fp8 cache): decode steps at several batch sizes and
// contexts next to the HBM floor, a decode step with graphs off, the
// kernels of one decode step, and an 8K-token prefill. Settings:
// STRATA_FLASH_LAYERS (4), STRATA_FLASH_EXPERTS (256), STRATA_FLASH_BATCHES
// (1,8,64,256), STRATA_FLASH_CONTEXTS (4096,65536), STRATA_FLASH_PREFILL
// (8192), STRATA_FLASH_PROFILE (1: the batches whose kernels are listed),
// STRATA_FLASH_DIR (where the checkpoint is written), STRATA_FLASH_DEPTH
// (the checkpoint loaded as a model of that many layers, its last two
// repeated, each layer in its own device memory: deepseekv4.LoadDeep; max:
// as many as the device's free memory holds with the largest cache the
// table asks for; only the decode table is run then).
func BenchmarkFlash(b *testing.B) {
	dev := device(b)
	layers, experts := envInt("STRATA_FLASH_LAYERS", 4), envInt("STRATA_FLASH_EXPERTS", 256)
	cfgJSON := flashJSON(layers, experts)
	dir := os.Getenv("STRATA_FLASH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("strata-flash-%d-%d", layers, experts))
	}
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors.index.json")); err != nil {
		start := time.Now()
		if err := deepseekv4.WriteSynthetic(dir, []byte(cfgJSON), 1); err != nil {
			b.Fatal(err)
		}
		fmt.Printf("FLASH wrote %d layers, %d experts to %s in %.1fs\n", layers, experts, dir, time.Since(start).Seconds())
	}
	be, err := NewBackendOn(dev, Fast)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	// STRATA_FLASH_MOE_MINPT: gemvxMoeMinPT for the whole benchmark (1:
	// gemvx_moe_fp4_ring for tiles of one pair too; for ncu runs).
	if v := envInt("STRATA_FLASH_MOE_MINPT", 0); v > 0 {
		be.gemvxMoeMinPT = v
	}
	minPT := be.gemvxMoeMinPT
	// STRATA_FLASH_MOEH=0 or 1: the FP4 experts on the float16 tensor
	// cores (moeH, the default) off or on for the whole benchmark.
	moeH := be.moeH
	if v := os.Getenv("STRATA_FLASH_MOEH"); v != "" {
		moeH = v == "1"
	}
	be.moeH = moeH
	// STRATA_FLASH_ATTN_TC_MINT: attnTCMinT for the whole benchmark (1:
	// attn_tc at one token too; for ncu runs).
	if v := envInt("STRATA_FLASH_ATTN_TC_MINT", 0); v > 0 {
		be.attnTCMinT = v
	}
	printKernelAttrs(dev)
	fp8, err := cache.ParseDType("fp8")
	if err != nil {
		b.Fatal(err)
	}
	batches := intList(os.Getenv("STRATA_FLASH_BATCHES"), []int{1, 8, 64, 256})
	contexts := intList(os.Getenv("STRATA_FLASH_CONTEXTS"), []int{4096, 65536})
	depth := layers
	if v := os.Getenv("STRATA_FLASH_DEPTH"); v == "max" {
		depth = flashMaxDepth(b, be, dir, layers, fp8, batches, contexts)
	} else if v != "" {
		depth = envInt("STRATA_FLASH_DEPTH", layers)
	}
	start := time.Now()
	var m *deepseekv4.Model
	if depth > layers {
		m, err = deepseekv4.LoadDeep(dir, be, model.Options{CacheDType: fp8}, depth, 2)
	} else {
		m, err = deepseekv4.LoadWith(dir, be, model.Options{CacheDType: fp8})
	}
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	fmt.Printf("FLASH loaded on %s (pdl %v) in %.1fs\n", be.Name(), be.PDL(), time.Since(start).Seconds())
	cfg := m.Cfg
	var ratios []string
	for _, l := range cfg.Layers {
		ratios = append(ratios, strconv.Itoa(l.Rate))
	}
	ctx := context.Background()

	// Bytes a decode step reads: every weight once (the routed experts: the
	// expected distinct ones of B tokens' K choices), and per token its
	// window, selected entries and indexer keys in the fp8 layouts.
	wb1, _ := m.DecodeReadBytes(0)
	e0 := m.W.Layers[0].FFN.Experts[0]
	eb := e0.W1.Bytes() + e0.W2.Bytes() + e0.W3.Bytes()
	K, E := cfg.ExpertsPerTok, len(m.W.Layers[0].FFN.Experts)
	weightsFor := func(B int) float64 {
		distinct := float64(E) * (1 - math.Pow(1-float64(K)/float64(E), float64(B)))
		return float64(wb1) + float64(len(cfg.Layers))*(distinct-float64(K))*float64(eb)
	}
	kvSlot, keySlot := int64(quant.FP8KVBytes(cfg.HeadDim, cfg.RopeDim)), int64(quant.FP8KeyBytes(cfg.IndexHeadDim))
	kvFor := func(n int) float64 {
		var kv int64
		for _, spec := range cfg.Layers {
			kv += int64(cfg.Window) * kvSlot
			switch spec.Attn {
			case deepseekv4.HCA:
				kv += int64(n/spec.Rate) * kvSlot
			case deepseekv4.CSA:
				kv += int64(n/spec.Rate)*keySlot + int64(min(n/spec.Rate, cfg.IndexTopK))*kvSlot
			}
		}
		return float64(kv)
	}

	// lastFirst: the logits of the first step of decode's last call, by
	// batch (every call starts from the same state: variants that keep the
	// bits give the same logits).
	lastFirst := map[int][]float32{}
	sameBits := func(B int, want []float32, what string) bool {
		got := lastFirst[B]
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				fmt.Printf("FLASH BITS %s batch %d: logit %d is %g, default %g: DIFFERENT\n", what, B, i, got[i], want[i])
				return false
			}
		}
		return len(got) == len(want)
	}
	var timed [2]Stats // the backend's counts before and after decode's timed steps
	decode := func(B, n, steps int, profile bool) (float64, *Profile) {
		pool, err := cache.PoolFor(be, m.CacheSpecs(), n+steps+4, B)
		if err != nil {
			b.Fatal(err)
		}
		defer pool.Close()
		batch := &model.Batch{}
		var seqs []*cache.Seq
		for i := range B {
			s, err := m.NewSeq(pool)
			if err != nil {
				b.Fatal(err)
			}
			s.Skip(n) // the cache as the device memory holds it: a step reads what it would after a prefill
			seqs = append(seqs, s)
			batch.Tokens = append(batch.Tokens, int32((i*7919+13)%cfg.VocabSize))
			batch.Spans = append(batch.Spans, model.Span{Seq: s, Start: i, Len: 1, Logits: model.LastLogits})
		}
		defer func() {
			for _, s := range seqs {
				s.Release()
			}
		}()
		var first []float32
		step := func() {
			lg, err := m.Forward(ctx, batch)
			if err != nil {
				b.Fatal(err)
			}
			if first == nil {
				first = slices.Clone(lg)
			}
		}
		for range 3 { // capture and warm
			step()
		}
		lastFirst[B] = first
		if profile {
			be.StartProfile()
			step()
			p, err := be.StopProfile()
			if err != nil {
				b.Fatal(err)
			}
			return 0, p
		}
		timed[0] = be.Stats()
		t0 := time.Now()
		for range steps {
			step()
		}
		sec := time.Since(t0).Seconds() / float64(steps)
		timed[1] = be.Stats()
		return sec, nil
	}

	fmt.Printf("FLASH %d layers (%s), %d experts of %d (fp4), weights %.2f GB read at batch 1\n", len(cfg.Layers), strings.Join(ratios, ","), E, cfg.MoEInter, weightsFor(1)/1e9)
	fmt.Println("FLASH | batch | context | ms/step | tokens/s | floor ms | of floor | graphs |")
	var hostLines []string
	for _, n := range contexts {
		for _, B := range batches {
			st := be.Stats()
			sec, _ := decode(B, n, 6, false)
			used := be.Stats().GraphLaunches > st.GraphLaunches
			floor := (weightsFor(B) + float64(B)*kvFor(n)) / hbmBytesPerSec
			fmt.Printf("FLASH | %d | %d | %.3f | %.0f | %.3f | %.2fx | %v |\n", B, n, 1e3*sec, float64(B)/sec, 1e3*floor, sec/floor, used)
			if n == contexts[0] {
				// The host's share of the timed steps: the ops' recording,
				// and the flushes' work before they wait.
				st, d := timed[0], timed[1]
				steps := 6.0
				hostLines = append(hostLines, fmt.Sprintf("FLASH host | batch %d | %.1f flushes a step | record %.1f us a step | flush %.1f us a step |",
					B, float64(d.Flushes-st.Flushes)/steps, 1e6*(d.Record-st.Record).Seconds()/steps, 1e6*(d.Flush-st.Flush).Seconds()/steps))
			}
		}
	}
	for _, l := range hostLines {
		fmt.Println(l)
	}
	if depth > layers {
		return // a deepened model: its decode table alone
	}
	// The logits' read-back at each batch: into Go (pageable) memory, as
	// Forward reads them, against pinned memory (with and without the copy
	// into the Go slice after it); medians of 21.
	for _, B := range batches {
		fmt.Println(flashReadLine(b, be, B, cfg.VocabSize))
	}
	be.SetGraphs(false)
	sec, _ := decode(1, contexts[0], 6, false)
	be.SetGraphs(true)
	fmt.Printf("FLASH | 1 | %d | %.3f | %.0f | - | - | off |\n", contexts[0], 1e3*sec, 1/sec)
	// The grouped expert kernels' run-3 rows a warp for tiles of 2 pairs
	// (batch 64; run 4's second call also had them for tiles of 1).
	be.moeRun3 = true
	for _, B := range batches {
		if B > 64 {
			continue
		}
		sec, _ := decode(B, contexts[0], 6, false)
		floor := (weightsFor(B) + float64(B)*kvFor(contexts[0])) / hbmBytesPerSec
		fmt.Printf("FLASH | %d | %d | %.3f | %.0f | %.3f | %.2fx | moe-r3 |\n", B, contexts[0], 1e3*sec, float64(B)/sec, 1e3*floor, sec/floor)
	}
	be.moeRun3 = false

	// A/B comparisons at the first context: set(false) is the default,
	// set(true) the alternative; each batch of abBatches alternates them
	// (STRATA_FLASH_AB_ROUNDS rounds of 20 timed steps each, default 3)
	// and prints the median of each side, and the alternative's bits
	// against the default's.
	abBatches := intList(os.Getenv("STRATA_FLASH_AB_BATCHES"), []int{1, 8})
	var abAt func(name string, abBatches []int, set func(bool))
	rounds := envInt("STRATA_FLASH_AB_ROUNDS", 3)
	ab := func(name string, set func(bool)) { abAt(name, abBatches, set) }
	// STRATA_FLASH_AB, when set, names the A/B lines to run (comma list).
	abOnly := strings.Split(os.Getenv("STRATA_FLASH_AB"), ",")
	// abAtCtx is abAt at each of ctxs.
	abAtCtx := func(name string, abBatches, ctxs []int, set func(bool)) {
		if abOnly[0] != "" && !slices.Contains(abOnly, name) {
			return
		}
		for _, ctxLen := range ctxs {
			for _, B := range abBatches {
				var t [2][]float64
				var want []float32
				same := true
				for range rounds {
					for side := range 2 {
						set(side == 1)
						sec, _ := decode(B, ctxLen, 20, false)
						t[side] = append(t[side], sec)
						if side == 0 {
							want = lastFirst[B]
						} else if !sameBits(B, want, name) {
							same = false
						}
					}
				}
				set(false)
				med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
				a, b := med(t[0]), med(t[1])
				diff := ""
				if !same { // how far: the alternative's last first step against the default's
					d := compareLogits(want, lastFirst[B], len(want)/B)
					diff = fmt.Sprintf(" (max abs %.3g, mean KL %.3g, top-1 %d/%d)", d.maxAbs, d.meanKL, d.agree, d.rows)
				}
				fmt.Printf("FLASH AB %s | batch %d | %d | default %.3f ms | %s %.3f ms | %+.1f%% | logits %s%s |\n", name, B, ctxLen, 1e3*a, name, 1e3*b, 100*(b-a)/a,
					map[bool]string{true: "identical", false: "DIFFERENT"}[same], diff)
			}
		}
	}
	abAt = func(name string, abBatches []int, set func(bool)) { abAtCtx(name, abBatches, contexts[:1], set) }
	// The layer's chains on one stream (the schedule before branches; with
	// the branches off the prefetches do nothing), and the L2 prefetches
	// (off by default) on their branch.
	abAt("one-stream", []int{1, 8, 64}, func(on bool) { be.SetBranches(!on) })
	// indexer_scores' entries a warp: 8 and 2 against indexerPerWarp's
	// choice, at every context.
	abAtCtx("indexer-ipw8", []int{1, 8}, contexts, func(on bool) { be.indexerIPW = map[bool]int{true: 8}[on] })
	abAtCtx("indexer-ipw2", []int{1, 8}, contexts, func(on bool) { be.indexerIPW = map[bool]int{true: 2}[on] })
	// Run 25's index scores (the query read again for each key).
	abAtCtx("indexer-r25", []int{1, 8}, contexts, func(on bool) { be.indexerR25 = on })
	// Run 26's top-k (the row read from memory in each pass).
	abAtCtx("topk-r26", []int{1, 8}, contexts, func(on bool) { be.topkR26 = on })
	// The split float32 attention kernels (Strict's) instead of attn_tc.
	abAtCtx("attn-tc-off", []int{1, 8}, contexts, func(on bool) { be.attnTCOff = on })
	// attn_tc at one token too.
	tcMin := be.attnTCMinT
	abAtCtx("attn-tc-t1", []int{1}, contexts, func(on bool) { be.attnTCMinT = map[bool]int{true: 1, false: tcMin}[on] })
	// attn_fd (float32 flash-decoding in one launch) at one token against
	// the split kernels, and up to 8 against attn_tc; whatever
	// STRATA_CUDA_ATTN_FD set, restored after.
	fdMax := be.attnFDMaxT
	abAtCtx("attn-fd", []int{1}, contexts, func(on bool) { be.attnFDMaxT = map[bool]int{true: 1}[on] })
	abAtCtx("attn-fd8", []int{8}, contexts, func(on bool) { be.attnFDMaxT = map[bool]int{true: 8}[on] })
	// attn_fd's blocks of 2 and of 8 heads against 4 (attn_fd at one token
	// on both sides; the same bits).
	for _, hg := range []int{2, 8} {
		abAtCtx(fmt.Sprintf("attn-fd-h%d", hg), []int{1}, contexts, func(on bool) {
			be.attnFDMaxT, be.afdHeads = max(fdMax, 1), map[bool]int{true: hg, false: afdHeads}[on]
		})
	}
	be.attnFDMaxT, be.afdHeads = fdMax, afdHeads
	abAt("prefetch-on", []int{1, 8}, func(on bool) { be.noPrefetch = !on })
	// gemvp's grids as many blocks an SM as their shared memory allows (up
	// to 4) instead of 2: the same bits.
	abAt("gemvp-occ", []int{1}, func(on bool) { be.k.gemvpOcc = on })
	// wo_a and wo_b in one launch (gemvp_fp8_u2s3_chain): the same bits.
	abAt("gemvp-chain", []int{1}, func(on bool) { be.gemvpChainOn = on })
	// The L2 prefetches from inside the products (run 29, off: every unit
	// of a gemvp block, every row of a moeq block): both (pf-on), gemvp's,
	// gemvp's first two units a block, moeq's. The same bits.
	pf := be.k.gemvpPF
	abAt("pf-on", []int{1, 8}, func(on bool) {
		be.moeqPF = on
		be.k.gemvpPF = map[bool]int{true: gemvpPFAll, false: pf}[on]
	})
	abAt("gemvp-pf", []int{1}, func(on bool) { be.k.gemvpPF = map[bool]int{true: gemvpPFAll, false: pf}[on] })
	abAt("gemvp-pf2", []int{1}, func(on bool) { be.k.gemvpPF = map[bool]int{true: 2, false: pf}[on] })
	abAt("moeq-pf", []int{1, 8}, func(on bool) { be.moeqPF = on })
	// What a step would take without a group of kernels (their launches
	// dropped from the recording; the logits are then wrong): the time
	// each group holds on a step's critical path as the graph runs it,
	// with the lanes' overlap and the early launches, which ncu's kernels
	// back to back cannot show. Not the kernels whose outputs index memory
	// (moe_route_sort's tiles, topk's and indexer_fix's entries): dropping
	// those reads out of bounds (run 28).
	for _, k := range []struct{ name, prefixes string }{
		{"skip-hc", "hc_post_pre"},
		{"skip-attn", "attn_"},
		{"skip-experts", "moe_gateup_,moe_down_"},
		{"skip-fp8", "gemvp_"},
		{"skip-norms", "rmsnorm"},
		{"skip-kvlane", "round_trip,store_ring"},
		{"skip-router", "gemv2_bf16_t1_s8"},
		{"skip-combine", "moe_combine,swiglu_act"},
		{"skip-indexer", "indexer_scores"},
		{"skip-compress", "compress_"},
	} {
		abAt(k.name, []int{1, 8}, func(on bool) { be.skipKernels(on, strings.Split(k.prefixes, ",")...) })
	}
	// A decode step as one recording, not one a layer (Submit): the host's
	// recording then waits for the GPU and the GPU for it.
	abAt("submit-off", []int{1, 8, 64, 256}, func(on bool) { be.noSubmit = on })
	abAt("submit-first", []int{1, 8}, func(on bool) { be.submitFirst = on })
	// What parts of hc_post_pre cost a step (timing only: the logits are
	// then wrong): its last block's work after the counter, its comb block,
	// its mix sums' block reductions, and all three.
	for _, d := range []struct {
		name string
		diag int
	}{{"diag-hc-tail", 1}, {"diag-hc-comb", 2}, {"diag-hc-sums", 4}, {"diag-hc-tailcomb", 3}, {"diag-hc-all", 7}} {
		abAt(d.name, []int{1, 8}, func(on bool) { be.hcDiag = map[bool]int{true: d.diag}[on] })
	}
	// hc_post_pre's timeline at batch 1 (hcclock: named in STRATA_FLASH_AB
	// only).
	if slices.Contains(abOnly, "hcclock") {
		flashHCClock(b, be, func() { decode(1, contexts[0], 1, false) })
		be.hcWarm = true
		flashHCClock(b, be, func() { decode(1, contexts[0], 1, false) })
		be.hcWarm = false
	}
	// hc_post_pre's two dry blocks (HC_WARM): the same bits.
	abAt("hc-warm", []int{1, 8}, func(on bool) { be.hcWarm = on })
	// indexer_fix's step in the top-k kernel (topk_sel): the same output.
	abAtCtx("topk-fix", []int{1, 8}, contexts, func(on bool) { be.topkFix = on })
	// The hand-off to the device goroutine spinning 100 and 50 us before
	// it sleeps (run 12's budgets), not deviceSpin and callerSpin (a small
	// batch's whole step): what the wake-ups cost a step.
	abAt("spin-short", []int{1, 8, 64}, func(on bool) {
		if on {
			be.dev.setSpin(100*time.Microsecond, 50*time.Microsecond)
		} else {
			be.dev.setSpin(deviceSpin, callerSpin)
		}
	})
	// The MoE's shared expert after the routed ones on the main stream (run
	// 12's schedule), not on its lane beside the routing and them.
	abAt("moe-shared-main", []int{1, 8, 64, 256}, func(on bool) { be.sharedOnMain = on })
	// Run 9's float32 GEMV for FP8 and BF16 products of up to 8 tokens, and
	// for BF16 ones alone (the head; other bits).
	abAt("gemvx-off", []int{1, 2, 4, 8}, func(on bool) { be.gemvxOff = on })
	abAt("gemvx-bf16-off", []int{1, 8}, func(on bool) { be.gemvxNoBF16 = on })
	// The lines up to gvxh-off measure gemvx_moe_fp4 and its ring (moeH
	// off on both sides).
	be.moeH = false
	// Run 9's float32 expert kernels for tiles of 2 pairs or more.
	abAt("gemvx-moe-off", []int{32, 64, 256}, func(on bool) { be.gemvxMoeOff = on })
	// gemvx_moe_fp4 for tiles of one pair too (batches up to E/K tokens).
	abAt("gemvx-moe-all", []int{1, 8, 16, 32}, func(on bool) { be.gemvxMoeMinPT = map[bool]int{true: 1, false: minPT}[on] })
	abAt("gemvx-moe-u4", []int{32, 64, 256}, func(on bool) { be.gemvxMoeU4 = on })
	// gemvx_moe_fp4 itself, and the ring of 3 stages, against the ring of
	// 4 (the same bits), at the batches that take them, and with tiles of
	// one pair too (gx-all-*: gemvxMoeMinPT 1 on both sides).
	for v := range gvxrStages {
		if v == gvxrVDefault {
			continue
		}
		name := map[bool]string{true: "gvxr-off", false: fmt.Sprintf("gvxr-st%d", gvxrStages[v])}[v == 0]
		abAt(name, []int{32, 64, 256}, func(on bool) { be.gvxrV = map[bool]int{true: v, false: gvxrVDefault}[on] })
		abAt("gx-all-"+name, []int{1, 8, 16}, func(on bool) {
			be.gemvxMoeMinPT = 1
			be.gvxrV = map[bool]int{true: v, false: gvxrVDefault}[on]
		})
		be.gemvxMoeMinPT = minPT
	}
	be.moeH = moeH
	// Without the FP4 experts on the float16 tensor cores (moeH): the
	// float32 _sx/_sxp kernels below half a pair an expert,
	// gemvx_moe_fp4_ring above; and with them at batches 1 and 8 too
	// (gvxh-all: tiles of one pair below moeHMinT tokens).
	abAt("gvxh-off", []int{16, 32, 64, 256}, func(on bool) { be.moeH = moeH && !on })
	abAt("gvxh-all", []int{1, 8}, func(on bool) { be.gemvxMoeMinPT = map[bool]int{true: 1, false: minPT}[on] })
	// gemvx's own entries for every FP8 product of 2 to 8 tokens, and
	// gemvxp (gemvx's FP8 products with their loads in a ring; the same
	// bits) for every width instead of up to 1024 columns.
	abAt("gemvxp-off", []int{2, 4, 8}, func(on bool) { be.k.gemvxpCols = map[bool]int{false: gemvxpColsDefault}[on] })
	abAt("gemvxp-all", []int{2, 4, 8}, func(on bool) {
		be.k.gemvxpCols = map[bool]int{true: math.MaxInt, false: gemvxpColsDefault}[on]
	})
	// gemv2 (run 10's FP8 products of one token) and gemvp's other ring
	// against gemvp's default (the same bits).
	for v := range len(gemvpRings) + 1 {
		if v == gemvpVDefault {
			continue
		}
		name := "gemvp-off"
		if v > 0 {
			name = fmt.Sprintf("gemvp-st%d", gemvpRings[v-1].S)
		}
		abAt(name, []int{1}, func(on bool) { be.k.gemvpV = map[bool]int{true: v, false: gemvpVDefault}[on] })
	}
	// Run 8's grouped expert kernels and tiles against the _sx entries:
	// at batch 64 and 256 (STRATA_FLASH_MOE_AB_BATCHES), and for tiles of
	// one pair alone (moe-p1-r8) at batches 1 and 8.
	abAt("moe-r8", intList(os.Getenv("STRATA_FLASH_MOE_AB_BATCHES"), []int{64, 256}), func(on bool) { be.moeR8 = on })
	abAt("moe-p1-r8", []int{1, 8}, func(on bool) { be.moeP1R8 = on })
	// moe.cu's _sx entries for tiles of 1 and 2 pairs instead of the _sxp
	// ones (the weight loads in a shared-memory ring); the same bits.
	abAt("moe-sxp-off", []int{8, 16}, func(on bool) { be.moeSXP = !on })
	// The float32 _sx/_sxp entries (below moeHMinT tokens) and
	// gemvx_moe_fp4_h (from it) instead of the integer dot products (moeq;
	// other bits).
	abAt("moeq-off", []int{1, 8}, func(on bool) { be.moeQ = !on })
	// gemvx_moe_fp4_h for tiles of one pair from moeHMinT tokens (run
	// 13's choice), and moeq wherever gemvx's experts' form would run.
	abAt("gvxh-16", []int{16}, func(on bool) { be.moeHTiles = on })
	abAt("moeq-gx", []int{32, 64, 256}, func(on bool) { be.moeQGX = on })
	abAt("moeq-g1", []int{1, 8}, func(on bool) { be.moeqG = map[bool]int{true: 1}[on] })
	abAt("moeq-g4", []int{1}, func(on bool) { be.moeqG = map[bool]int{true: 4}[on] })
	abAt("moeq-s4", []int{1, 8}, func(on bool) { be.moeqS4 = on })
	// moem (wgmma, the FP8 tensor cores) where moeq (the integer dot
	// products) takes the FP4 experts (other bits).
	abAt("moem", []int{1, 8, 16}, func(on bool) { be.moeM = on })
	// moeq's moe_down launched after the gate/up product, not early.
	abAt("moe-down-late", []int{1, 8}, func(on bool) { be.moeDownEarly = !on })
	// moeq's moe_gateup at one token launched after moe_route_sort.
	abAt("moe-gateup-late", []int{1}, func(on bool) { be.moeGateupEarly = !on })
	// Logits in chunks of 32 keys at small batches (run 11's).
	abAt("attn-lkc32", []int{1, 8, 16}, func(on bool) { be.attnLogits32 = on })
	// attn_values with all of a head's channels a block at small batches.
	abAt("attn-values-whole", []int{1, 8, 16}, func(on bool) { be.attnValuesWhole = on })
	// RMSNorm and RoPE as two launches instead of rmsnorm_rope.
	abAt("norm-rope-off", []int{1, 8, 64}, func(on bool) { be.normRoPEOff = on })
	abAt("hc-fused-off", []int{1, 8, 64}, func(on bool) { be.hcFusedOff = on })
	abAt("attn-rope-apart", []int{1, 8}, func(on bool) { be.attnRoPEApart = on })
	abAt("hc-late", []int{1, 8}, func(on bool) { be.hcLate = on })
	abAt("route-sort-off", []int{1}, func(on bool) { be.routeSortOff = on })
	abAt("route-r8", []int{1, 8, 64}, func(on bool) { be.routeR8 = on })
	ab("attn-r5", func(on bool) { be.attnScalar = on })
	ab("t8-r2", func(on bool) { be.k.t8R4 = !on })
	ab("grouped-r5", func(on bool) { be.k.groupedR5 = on })
	for _, n := range []int{2, 3, 4} {
		ab(fmt.Sprintf("moe-o%d", n), func(on bool) { be.moeOcc = map[bool]int{true: n}[on] })
	}
	ab("unmulti-r6", func(on bool) { be.unmulti = on })
	// gemmx against run 8's fast products: only above FastGEMVMaxT tokens.
	gemmBatches := intList(os.Getenv("STRATA_FLASH_GEMM_BATCHES"), []int{64, 256})
	abAt("gemm-r8", gemmBatches, func(on bool) { be.gemmR8 = on })
	abAt("attn-hg4", []int{8, 64, 256}, func(on bool) { be.attnTiledOff, be.attnHG4 = on, on })
	// attn_logits and attn_values (4 or 16 heads a block) instead of the
	// tiled attn_qk and attn_pv.
	abAt("attn-tiled-off", []int{1, 8, 64, 256}, func(on bool) { be.attnTiledOff = on })
	// The tiled kernels' small-launch layout (logits in chunks of 8 keys,
	// half heads) up to 8 tokens instead of 2.
	abAt("attn-tiny-8", []int{4, 8}, func(on bool) { be.attnTinyT = map[bool]int{true: 8}[on] })
	// attn_qk with 8 heads a block at small launches, and with one warp
	// a tile (run 20's) instead of 256 threads a block.
	abAt("attn-qk-hb8", []int{1, 2}, func(on bool) { be.attnQKHB8 = on })
	abAt("attn-qk-tiles", []int{1, 2, 8}, func(on bool) { be.attnQKTiles = on })
	abAt("indexer-r21", []int{1, 8}, func(on bool) { be.indexerR21 = on })
	// attn_qk's tiles of 4 keys a warp at large launches, not attn_qk8's 8.
	abAt("attn-qk-tk4", []int{8, 64, 256}, func(on bool) { be.attnQK4 = on })
	// attn_qk's key chunks of 16 or 8 keys at large launches, not 32.
	abAt("attn-qk-kb16", []int{64, 256}, func(on bool) { be.attnQKKB = map[bool]int{true: 16}[on] })
	abAt("attn-qk-kb8", []int{64, 256}, func(on bool) { be.attnQKKB = map[bool]int{true: 8}[on] })
	abAt("attn-combine-r21", []int{1, 8}, func(on bool) { be.attnCombineR21 = on })
	// hc_post_pre at every batch (two blocks an SM), not hc_post_pre_o4
	// from hcO4MinT tokens.
	abAt("hc-o2", []int{64, 256}, func(on bool) { be.hcO2 = on })
	// A head's channels over 4 attn_pv blocks at small launches, not 2.
	abAt("attn-pv-ds4", []int{1, 2}, func(on bool) { be.attnTinyDS = map[bool]int{true: 4}[on] })
	// One token's FP8 products on the float16 tensor cores (gemvh; other
	// bits) instead of the float32 GEMV (gemvp); with gemvh's rings of 4
	// stages instead of 3 (the same bits); with products of fewer than
	// 128 tiles of 16 rows (wq_a, wkv) left on gemvp.
	abAt("gemvh", []int{1}, func(on bool) { be.gemvh = on })
	abAt("gemvh-s4", []int{1}, func(on bool) { be.gemvh, be.k.gemvhS = on, map[bool]int{true: 1}[on] })
	abAt("gemvh-min128", []int{1}, func(on bool) { be.gemvh, be.gemvhMinTiles = on, map[bool]int{true: 128}[on] })
	// gemvh with the L2 prefetches on: what gemvh reads from the L2.
	abAt("gemvh-pf", []int{1, 8}, func(on bool) { be.gemvh, be.noPrefetch = on, !on })
	abAt("gemmx-o1", gemmBatches, func(on bool) { be.k.useO1 = on })
	// gemmx_fp8 with run 22's software decode of every chunk.
	abAt("gemmx-dec-r22", gemmBatches, func(on bool) { be.k.useR22 = on })
	// The crossover: run 8's FastGEMVMaxT (32) against run 9's (8).
	abAt("gemv-to-32", []int{16, 32}, func(on bool) { be.k.gemvMaxT = map[bool]int{true: 32, false: FastGEMVMaxT}[on] })
	pdl0 := be.PDL()
	ab(map[bool]string{false: "pdl-on", true: "pdl-off"}[pdl0], func(on bool) { be.SetPDL(pdl0 != on) })
	be.k.t8R4 = true
	abAt("pdl-early-off", []int{1, 8}, func(on bool) { be.SetPDLEarly(!on) })
	abAt("pdl-small", []int{1, 8}, func(on bool) { be.SetPDLSmall(map[bool]int{true: dev.Props().SMs}[on]) })

	// Kernel breakdowns: batch 1 as "FLASH kernel" lines, other batches of
	// STRATA_FLASH_PROFILE (1) as "FLASH kernel B=n" lines; the batches of
	// STRATA_FLASH_PROFILE_GX again with gemvx_moe_fp4_ring for tiles of
	// one pair too ("FLASH kernel gx B=n"), and of STRATA_FLASH_PROFILE_H
	// with gemvx_moe_fp4_h for every tile ("FLASH kernel h B=n").
	type profiled struct {
		B     int
		gx, h bool // gemvxMoeMinPT 1; and moeH
	}
	var profiles []profiled
	for _, B := range intList(os.Getenv("STRATA_FLASH_PROFILE"), []int{1}) {
		profiles = append(profiles, profiled{B, false, false})
	}
	for _, B := range intList(os.Getenv("STRATA_FLASH_PROFILE_GX"), nil) {
		profiles = append(profiles, profiled{B, true, false})
	}
	for _, B := range intList(os.Getenv("STRATA_FLASH_PROFILE_H"), nil) {
		profiles = append(profiles, profiled{B, true, true})
	}
	for _, pr := range profiles {
		B := pr.B
		tag := "FLASH kernel"
		if B != 1 {
			tag = fmt.Sprintf("FLASH kernel B=%d", B)
		}
		if pr.gx {
			tag = fmt.Sprintf("FLASH kernel gx B=%d", B)
			be.gemvxMoeMinPT = 1
		}
		if pr.h {
			tag = fmt.Sprintf("FLASH kernel h B=%d", B)
			be.moeH = true
		}
		_, p := decode(B, contexts[0], 1, true)
		type row struct {
			name string
			kt   *KernelTime
		}
		var rows []row
		total := 0.0
		launches := 0
		for n, kt := range p.Kernels {
			rows = append(rows, row{n, kt})
			total += kt.Ms
			launches += kt.Launches
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].kt.Ms > rows[j].kt.Ms })
		fmt.Printf("FLASH kernels of one decode step (batch %d, context %d, %s): %.3f ms of GPU time in all, %d launches\n", B, contexts[0], tag, total, launches)
		for _, r := range rows {
			fmt.Printf("%s | %s | %d | %.3f ms | %.0f%% |\n", tag, r.name, r.kt.Launches, r.kt.Ms, 100*r.kt.Ms/total)
		}
		// The launches in order (where each layer's time goes), as
		// "FLASH launch B=n" lines.
		for i, l := range p.Order {
			fmt.Printf("FLASH launch B=%d | %d | %s | %dx%dx%d | %.1f us |\n", B, i, l.Name, l.Grid.X, l.Grid.Y, l.Grid.Z, 1e3*l.Ms)
		}
		be.gemvxMoeMinPT, be.moeH = minPT, moeH
	}

	if L := envInt("STRATA_FLASH_PREFILL", 8192); L > 0 {
		pool, err := cache.PoolFor(be, m.CacheSpecs(), L+1, 1)
		if err != nil {
			b.Fatal(err)
		}
		run := func() float64 {
			s, err := m.NewSeq(pool)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Release()
			toks := make([]int32, L)
			for i := range toks {
				toks[i] = int32((i*7919 + 13) % cfg.VocabSize)
			}
			t0 := time.Now()
			if _, err := m.Forward(ctx, &model.Batch{Tokens: toks, Spans: []model.Span{{Seq: s, Len: L, Logits: model.LastLogits}}}); err != nil {
				b.Fatal(err)
			}
			return time.Since(t0).Seconds()
		}
		run() // sizes the scratch arena
		be.gemmR8 = true
		sec8 := run()
		be.gemmR8, be.moeXOff = false, true
		secM := run()
		be.moeXOff, be.k.useO1 = false, true
		secO := run()
		be.k.useO1 = false
		sec := run()
		pool.Close()
		flops := 2 * float64(L) * float64(activeParams(m)) // matrix products only
		fmt.Printf("FLASH prefill %d tokens: %.3f s, %.0f tokens/s, %.1f TFLOP/s of matrix products (bf16 dense peak ~790)\n", L, sec, float64(L)/sec, flops/sec/1e12)
		fmt.Printf("FLASH prefill %d tokens, run 8's fast products (gemm-r8): %.3f s, %.0f tokens/s\n", L, sec8, float64(L)/sec8)
		fmt.Printf("FLASH prefill %d tokens, gemmx but run 8's experts (moex-off): %.3f s, %.0f tokens/s\n", L, secM, float64(L)/secM)
		fmt.Printf("FLASH prefill %d tokens, gemmx's _o1 entries (gemmx-o1): %.3f s, %.0f tokens/s\n", L, secO, float64(L)/secO)
	}

}

// activeParams is the weights one token multiplies: every matrix but the
// routed experts, which count K times.
func activeParams(m *deepseekv4.Model) int64 {
	var n int64
	add := func(rows, cols int) { n += int64(rows) * int64(cols) }
	W := m.W
	add(W.Output.Rows, W.Output.Cols)
	for _, L := range W.Layers {
		a := &L.Attn
		for _, w := range append([]*compute.Matrix{a.WqA, a.WqB, a.Wkv, a.WoB, L.FFN.Gate, L.FFN.Shared.W1, L.FFN.Shared.W2, L.FFN.Shared.W3}, a.WoA...) {
			add(w.Rows, w.Cols)
		}
		e := L.FFN.Experts[0]
		n += int64(m.Cfg.ExpertsPerTok) * (int64(e.W1.Rows)*int64(e.W1.Cols) + int64(e.W2.Rows)*int64(e.W2.Cols) + int64(e.W3.Rows)*int64(e.W3.Cols))
	}
	return n
}

func intList(s string, def []int) []int {
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// printKernelAttrs prints, as "FLASH regs" lines, the registers, the
// local memory (spills) and the static shared memory of the kernels the
// Flash-width step spends its time in.
func printKernelAttrs(dev *Device) {
	k := dev.Kernels()
	var names []string
	for _, n := range k.names {
		for _, p := range []string{"gemmx", "moe_gateup_fp4", "moe_down_fp4", "attn_", "gemv2_fp8_t1_s1", "gemv2_bf16_t1_s1", "gemv5_fp8_t8_s1", "gemvp_fp8_u2s", "hc_pre_split", "hc_mix_partial", "hc_post_pre", "rmsnorm", "moe_route", "gemvx_moe_fp4"} {
			if strings.HasPrefix(n, p) {
				names = append(names, n)
				break
			}
		}
	}
	sort.Strings(names)
	byName := map[string]Func{}
	for f, n := range k.names {
		byName[n] = f
	}
	err := dev.Do(context.Background(), func(t *Thread) error {
		for _, n := range names {
			a, err := t.FuncAttrs(byName[n])
			if err != nil {
				return err
			}
			fmt.Printf("FLASH regs | %s | %d regs | %d local bytes | %d static shared |\n", n, a.Regs, a.LocalBytes, a.StaticShared)
		}
		return nil
	})
	if err != nil {
		fmt.Printf("FLASH regs: %v\n", err)
	}
}

// logitDiff is how far logits b are from logits a, rows of vocab each.
type logitDiff struct {
	maxAbs, meanKL float64 // KL(softmax a ‖ softmax b), the mean over rows
	agree, rows    int     // rows whose largest logit is the same
}

func compareLogits(a, b []float32, vocab int) logitDiff {
	var d logitDiff
	if vocab <= 0 || len(a) != len(b) {
		return d
	}
	for r := 0; r+vocab <= len(a); r += vocab {
		ra, rb := a[r:r+vocab], b[r:r+vocab]
		lse := func(v []float32) float64 {
			m := float64(slices.Max(v))
			var s float64
			for _, x := range v {
				s += math.Exp(float64(x) - m)
			}
			return m + math.Log(s)
		}
		la, lb := lse(ra), lse(rb)
		var kl float64
		for i := range ra {
			d.maxAbs = max(d.maxAbs, math.Abs(float64(ra[i]-rb[i])))
			pa := float64(ra[i]) - la
			kl += math.Exp(pa) * (pa - (float64(rb[i]) - lb))
		}
		d.meanKL += kl
		d.rows++
		if argmax(ra) == argmax(rb) {
			d.agree++
		}
	}
	if d.rows > 0 {
		d.meanKL /= float64(d.rows)
	}
	return d
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// flashReadLine times reading B rows of vocab float32 logits from the
// device: the medians of 21 reads into a Go slice (Backend.Read), into
// pinned memory, and into pinned memory then copied into the Go slice.
func flashReadLine(b *testing.B, be *Backend, B, vocab int) string {
	src, err := be.Alloc(compute.F32, B, vocab)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(src)
	dst := make([]float32, B*vocab)
	n := 4 * B * vocab
	var pinned HostBuf
	be.do(func(t *Thread) error {
		var err error
		pinned, err = t.AllocHost(n)
		return err
	})
	if be.err != nil {
		b.Fatal(be.err)
	}
	defer be.do(func(t *Thread) error { return t.FreeHost(pinned) })
	med := func(fn func()) float64 {
		var v []float64
		for range 21 {
			t0 := time.Now()
			fn()
			v = append(v, time.Since(t0).Seconds())
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	goMem := med(func() {
		if err := be.Read(dst, src); err != nil {
			b.Fatal(err)
		}
	})
	p := be.ptr(src)
	pin := func(copyBack bool) func() {
		return func() {
			be.do(func(t *Thread) error {
				if err := t.CopyFromDevice(pinned.Bytes(), p, t.Stream()); err != nil {
					return err
				}
				return t.Sync(t.Stream())
			})
			if copyBack {
				copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), n), pinned.Bytes())
			}
		}
	}
	pinOnly, pinCopy := med(pin(false)), med(pin(true))
	gbs := func(s float64) float64 { return float64(n) / s / 1e9 }
	return fmt.Sprintf("FLASH read | batch %d | %d KB | go memory %.1f us (%.1f GB/s) | pinned %.1f us (%.1f GB/s) | pinned + copy %.1f us |",
		B, n>>10, 1e6*goMem, gbs(goMem), 1e6*pinOnly, gbs(pinOnly), 1e6*pinCopy)
}

// flashMaxDepth is the most layers (the checkpoint's, then pairs of its
// last two) whose weights and the largest decode pool of the table fit in
// the device's free memory, less a reserve for the activations, graphs and
// logits. The checkpoint's shards (WriteSynthetic's, one a layer) give the
// bytes: a layer's weights on the device are its tensors' bytes.
func flashMaxDepth(b *testing.B, be *Backend, dir string, layers int, dt cache.DType, batches, contexts []int) int {
	var free int64
	if err := be.do(func(t *Thread) error { var err error; free, _, err = t.MemInfo(); return err }); err != nil {
		b.Fatal(err)
	}
	size := func(name string) int64 {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		return st.Size()
	}
	stored := size("model-head.safetensors")
	for l := range layers {
		stored += size(fmt.Sprintf("model-layer%03d.safetensors", l))
	}
	pair := size(fmt.Sprintf("model-layer%03d.safetensors", layers-2)) + size(fmt.Sprintf("model-layer%03d.safetensors", layers-1))
	cfg, err := deepseekv4.LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		b.Fatal(err)
	}
	const reserve = 8 << 30
	best := layers
	for n := layers; ; n += 2 {
		deep, err := deepseekv4.Deepen(cfg, n, 2)
		if err != nil {
			b.Fatal(err)
		}
		specs := deep.CacheSpecs(dt)
		pb := cache.PageBytesFor(specs)
		var pool int64
		for _, B := range batches {
			for _, c := range contexts {
				pool = max(pool, int64(B)*int64(cache.TotalPages(specs, c+10, pb))*int64(pb))
			}
		}
		need := stored + int64((n-layers)/2)*pair + pool + reserve
		if need > free {
			fmt.Printf("FLASH depth %d: %.1f GB free; %d layers would need %.1f GB (weights %.1f, the largest pool %.1f, reserve %.1f)\n",
				best, float64(free)/1e9, n, float64(need)/1e9, float64(stored+int64((n-layers)/2)*pair)/1e9, float64(pool)/1e9, float64(reserve)/1e9)
			return best
		}
		best = n
	}
}

// skipKernels drops (on) or restores the launches of every kernel whose
// name starts with one of prefixes (the skip-* lines of BenchmarkFlash).
func (b *Backend) skipKernels(on bool, prefixes ...string) {
	if !on {
		b.rt.skip = nil
		return
	}
	b.rt.skip = map[Func]bool{}
	for f, name := range b.k.names {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				b.rt.skip[f] = true
			}
		}
	}
}

// flashHCClock prints the timeline of token 0 in each hc_post_pre launch
// of a batch-1 step (model.cu's hc_stamp; "FLASH hcclock" lines): when
// the blocks start and reach the counter, then the tail's and the comb
// block's phases after the last arrival, in SM clocks. Once as the step
// runs, once with HC_DIAG_TWICE (their work after the loads a second time:
// cold, then warm). step runs decode's four steps at batch 1.
func flashHCClock(b *testing.B, be *Backend, step func()) {
	const slots = 512
	buf, err := be.Alloc(compute.F32, slots, 2*hcClockStride)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(buf)
	p := be.ptr(buf)
	raw, zero := make([]float32, slots*2*hcClockStride), make([]float32, slots*2*hcClockStride)
	for _, diag := range []int{0, 8} {
		be.hcDiag, be.hcClock, be.hcClockSlots, be.hcClockN = diag, p, slots, 0
		step()
		per := be.hcClockN / 4 // the launches of one of decode's four steps
		be.hcClockSlots, be.hcClockN = max(per, 1), 0
		be.Write(buf, zero)
		step()
		if err := be.Read(raw, buf); err != nil {
			b.Fatal(err)
		}
		st := unsafe.Slice((*uint64)(unsafe.Pointer(&raw[0])), len(raw)/2)
		for k := range per {
			fmt.Println(hcClockLine(map[bool]string{true: " warm"}[be.hcWarm], diag, k, st[k*hcClockStride:(k+1)*hcClockStride]))
		}
	}
	be.hcDiag, be.hcClock, be.hcClockSlots, be.hcClockN = 0, 0, 0, 0
}

// hcClockLine formats one launch's stamps (hc_stamp's layout); tag follows
// "FLASH hcclock" (" warm" with the dry blocks).
func hcClockLine(tag string, diag, k int, c []uint64) string {
	const tail, comb = hcClockTail, hcClockComb
	var starts, arr []uint64
	for s := range 64 {
		if c[2*s] != 0 {
			starts = append(starts, c[2*s])
			arr = append(arr, c[2*s+1])
		}
	}
	if len(starts) == 0 {
		return fmt.Sprintf("FLASH hcclock%s | diag %d | launch %d | no stamps |", tag, diag, k)
	}
	slices.Sort(starts)
	slices.Sort(arr)
	g0, last := starts[0], arr[len(arr)-1]
	ns := func(g uint64) int64 { return int64(g) - int64(last) }
	// phases: the SM clocks between consecutive written points of a part.
	phases := func(q int, names []string) string {
		var out []string
		prev := -1
		for i, name := range names {
			if c[q+i] == 0 || name == "" {
				continue
			}
			if prev >= 0 {
				out = append(out, fmt.Sprintf("%s %d", name, int64(c[q+16+i])-int64(c[q+16+prev])))
			}
			prev = i
		}
		return strings.Join(out, ", ")
	}
	end := func(q int) uint64 {
		e := uint64(0)
		for i := range 16 {
			e = max(e, c[q+i])
		}
		return e
	}
	ghz := 0.0
	if e := end(tail); e > c[tail] && c[tail] != 0 {
		i := slices.Index(c[tail:tail+16], e)
		ghz = float64(int64(c[tail+16+i])-int64(c[tail+16])) / float64(e-c[tail])
	}
	tn := []string{"start", "fence", "loads", "mix", "weights", "rms", "stores", "mix2", "weights2", "rms2", "stores2", "", "", "", "", "end"}
	cn := []string{"start", "spin", "loads", "mix", "comb", "mix2", "comb2"}
	line := fmt.Sprintf("FLASH hcclock%s | diag %d | launch %d | %d blocks | starts over %d ns | arrivals %d .. %d (median %d) ns after the first start |",
		tag, diag, k, len(starts), starts[len(starts)-1]-g0, arr[0]-g0, last-g0, arr[len(arr)/2]-g0)
	if c[tail] != 0 {
		line += fmt.Sprintf(" tail at %+d ns, clocks: %s; ends %+d ns |", ns(c[tail]), phases(tail, tn), ns(end(tail)))
	}
	if c[comb] != 0 {
		line += fmt.Sprintf(" comb at %+d ns, clocks: %s; ends %+d ns |", ns(c[comb]), phases(comb, cn), ns(end(comb)))
	}
	return line + fmt.Sprintf(" %.2f GHz |", ghz)
}
