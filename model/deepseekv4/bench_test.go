package deepseekv4

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/internal/membw"
	"github.com/strata-inference/strata/model"
)

// benchConfig is a DeepSeek-V4-shaped model of realistic width: hidden 2048,
// 16 heads of 512, 64 FP4 experts of 1024, FP8 elsewhere, 8 layers with the
// Flash pattern (2 window-only, then CSA and HCA alternating).
const benchConfig = `{
  "model_type": "deepseek_v4", "vocab_size": 16384, "hidden_size": 2048, "num_hidden_layers": 8,
  "num_attention_heads": 16, "num_key_value_heads": 1, "head_dim": 512, "qk_rope_head_dim": 64,
  "q_lora_rank": 1024, "o_groups": 4, "o_lora_rank": 1024,
  "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512,
  "n_routed_experts": 64, "num_experts_per_tok": 6, "moe_intermediate_size": 1024, "n_shared_experts": 1,
  "num_hash_layers": 3, "compress_ratios": [0, 0, 4, 128, 4, 128, 4, 128], "sliding_window": 128,
  "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6, "rms_norm_eps": 1e-6,
  "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "scoring_func": "sqrtsoftplus",
  "rope_theta": 10000, "compress_rope_theta": 160000,
  "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1},
  "max_position_embeddings": 1048576, "num_nextn_predict_layers": 0, "bos_token_id": 0, "eos_token_id": 1,
  "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0", "weight_block_size": [128, 128]},
  "expert_dtype": "fp4"
}`

// syntheticDir writes the benchmark checkpoint once into the temp dir (about
// 1.7 GB) and reuses it across runs.
func syntheticDir(b *testing.B) string {
	sum := sha256.Sum256([]byte(benchConfig))
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("strata-synthetic-%x", sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors.index.json")); err == nil {
		return dir
	}
	start := time.Now()
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	if err := WriteSynthetic(tmp, []byte(benchConfig), 1); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote synthetic checkpoint %s in %s", dir, time.Since(start))
	return dir
}

// fillContext makes seq look like it has seen n tokens: every slot of every
// kind holds random values. A decode step reads exactly what it would after
// a real prefill of n tokens.
func fillContext(t testing.TB, seq *cache.Seq, n int) {
	if err := seq.Reserve(n); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	be := seq.Pool().Backend()
	for i, s := range seq.Specs() {
		for j := range s.Layers {
			for k := range s.Slots(n) {
				sl := seq.Slot(i, j, k).As(compute.F32)
				v := make([]float32, sl.Len())
				for x := range v {
					v[x] = float32(r.NormFloat64())
				}
				be.Write(sl, v)
			}
		}
	}
	seq.Skip(n)
}

// BenchmarkDecodeStep times one decode step of the synthetic model at
// context 4096 and reports tokens/s next to the floor: the bytes a step must
// read divided by the measured memory bandwidth.
func BenchmarkDecodeStep(b *testing.B) {
	if testing.Short() {
		b.Skip("writes a 1.7 GB checkpoint")
	}
	dir := syntheticDir(b)
	m, err := Load(dir, cpu.New(0))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Prefault(context.Background()); err != nil { // steady state: weights resident
		b.Fatal(err)
	}
	const ctxLen = 4096
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), ctxLen+b.N+1, 1)
	if err != nil {
		b.Fatal(err)
	}
	seq, err := m.NewSeq(pool)
	if err != nil {
		b.Fatal(err)
	}
	fillContext(b, seq, ctxLen)
	// Warm the page cache and the kernels.
	batch := &model.Batch{Tokens: []int32{7}, Spans: []model.Span{{Seq: seq, Len: 1, Logits: model.LastLogits}}}
	if _, err := m.Forward(context.Background(), batch); err != nil {
		b.Fatal(err)
	}
	wb, kvb := m.DecodeReadBytes(ctxLen)
	bw := membw.Measure()
	b.ResetTimer()
	for i := range b.N {
		batch.Tokens[0] = int32(i % m.Cfg.VocabSize)
		if _, err := m.Forward(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	perStep := b.Elapsed().Seconds() / float64(b.N)
	floor := float64(wb+kvb) / (bw * 1e9)
	b.ReportMetric(1/perStep, "tokens/s")
	b.ReportMetric(1/floor, "floor-tokens/s")
	b.ReportMetric(float64(wb+kvb)/1e6, "MB/step")
	b.ReportMetric(bw, "mem-GB/s")
	b.ReportMetric(floor/perStep, "of-floor")
}

// BenchmarkPrefill times a 256-token prefill of the synthetic model in one
// forward pass and reports tokens/s.
func BenchmarkPrefill(b *testing.B) {
	if testing.Short() {
		b.Skip("writes a 1.7 GB checkpoint")
	}
	dir := syntheticDir(b)
	m, err := Load(dir, cpu.New(0))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Prefault(context.Background()); err != nil {
		b.Fatal(err)
	}
	const n = 256
	toks := make([]int32, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range toks {
		toks[i] = int32(r.IntN(m.Cfg.VocabSize))
	}
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), n, 1)
	if err != nil {
		b.Fatal(err)
	}
	run := func() {
		seq, err := m.NewSeq(pool)
		if err != nil {
			b.Fatal(err)
		}
		defer seq.Release()
		batch := &model.Batch{Tokens: toks, Spans: []model.Span{{Seq: seq, Len: n, Logits: model.LastLogits}}}
		if _, err := m.Forward(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
	run()
	b.ResetTimer()
	for range b.N {
		run()
	}
	b.StopTimer()
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
}
