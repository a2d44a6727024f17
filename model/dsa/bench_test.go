package dsa_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/internal/membw"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv32"
	"github.com/strata-inference/strata/model/dsa"
)

// benchConfig is a mid-size DeepSeek-V3.2 (bf16 weights, 4 layers, 16
// heads, a 256-wide latent, an indexer of 16 heads keeping 512 keys, 32
// experts top 4 in 4 groups keeping 2): big enough that a decode step's
// time is its products and its attention over the selected latents.
const benchConfig = `{
  "model_type": "deepseek_v32", "vocab_size": 8192, "hidden_size": 1024, "intermediate_size": 2048, "moe_intermediate_size": 256,
  "num_hidden_layers": 4, "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
  "num_attention_heads": 16, "q_lora_rank": 384, "kv_lora_rank": 256, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64,
  "n_routed_experts": 32, "num_experts_per_tok": 4, "n_shared_experts": 1, "n_group": 4, "topk_group": 2,
  "index_topk": 512, "index_head_dim": 64, "index_n_heads": 16, "max_position_embeddings": 16384,
  "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "mscale": 1.0, "mscale_all_dim": 1.0}
}`

// BenchmarkDecodeStep times one decode step at context 4096 (the cache
// filled with random latents and keys, so the indexer scores 4096 keys and
// attention reads the 512 it keeps) and reports tokens/s next to the floor:
// the bytes a step must read divided by the measured memory bandwidth.
func BenchmarkDecodeStep(b *testing.B) {
	dir := b.TempDir()
	if err := dsa.WriteSynthetic(dir, []byte(benchConfig), &deepseekv32.Family, 1); err != nil {
		b.Fatal(err)
	}
	m, err := deepseekv32.Load(dir, cpu.New(0), model.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const ctxLen = 4096
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), ctxLen+b.N+1, 1)
	if err != nil {
		b.Fatal(err)
	}
	seq, err := m.NewSeq(pool)
	if err != nil {
		b.Fatal(err)
	}
	if err := seq.Reserve(ctxLen); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i, s := range seq.Specs() {
		for j := range s.Layers {
			for k := range s.Slots(ctxLen) {
				sl := seq.Slot(i, j, k).As(compute.F32)
				v := make([]float32, sl.Len())
				for x := range v {
					v[x] = float32(r.NormFloat64())
				}
				m.Backend().Write(sl, v)
			}
		}
	}
	seq.Skip(ctxLen)
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
	b.ReportMetric(floor/perStep, "of-floor")
}
