package deepseekv4

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/safetensors"
)

// WriteSynthetic writes a random-weight checkpoint for the Hub-style config
// configJSON into dir, in the released naming and formats: FP8 e4m3 with
// UE8M0 block scales where the release uses FP8 (when the config has a
// quantization_config), packed FP4 routed experts (when expert_dtype is fp4),
// bf16 and f32 elsewhere, one shard per layer with model.safetensors.index.json.
// It exists to benchmark realistic shapes without a real checkpoint; the
// weights are scaled so activations stay finite, nothing more.
func WriteSynthetic(dir string, configJSON []byte, seed uint64) error {
	cfg, err := ParseConfig(configJSON)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), configJSON, 0o644); err != nil {
		return err
	}
	g := &synth{cfg: cfg, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	weightMap := map[string]string{}
	flush := func(file string) error {
		for _, t := range g.out {
			weightMap[t.Name] = file
		}
		err := safetensors.WriteFile(filepath.Join(dir, file), g.out, nil)
		g.out = nil
		return err
	}
	D, V := cfg.Hidden, cfg.VocabSize
	g.bf16("embed.weight", V, D, 1)
	g.bf16("head.weight", V, D, 1/math.Sqrt(float64(D)))
	g.head("")
	if err := flush("model-head.safetensors"); err != nil {
		return err
	}
	for i, l := range cfg.Layers {
		g.layer(fmt.Sprintf("layers.%d.", i), l)
		if err := flush(fmt.Sprintf("model-layer%03d.safetensors", i)); err != nil {
			return err
		}
	}
	for i, l := range cfg.MTP {
		p := fmt.Sprintf("mtp.%d.", i)
		g.layer(p, l)
		g.linear(p+"e_proj.weight", D, D)
		g.linear(p+"h_proj.weight", D, D)
		g.norm(p+"enorm.weight", D)
		g.norm(p+"hnorm.weight", D)
		g.head(p)
		if err := flush(fmt.Sprintf("model-mtp%d.safetensors", i)); err != nil {
			return err
		}
	}
	idx, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"synthetic": true}, "weight_map": weightMap}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), idx, 0o644)
}

type synth struct {
	cfg *Config
	r   *rand.Rand
	out []safetensors.WriteTensor
}

func (g *synth) put(name string, dt safetensors.DType, shape []int, data []byte) {
	g.out = append(g.out, safetensors.WriteTensor{Name: name, DType: dt, Shape: shape, Data: data})
}

func (g *synth) gauss(n int, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(g.r.NormFloat64() * std)
	}
	return v
}

func (g *synth) f32(name string, shape []int, v []float32) {
	b, _ := safetensors.EncodeFloat32s("F32", v)
	g.put(name, "F32", shape, b)
}

func (g *synth) bf16(name string, rows, cols int, std float64) {
	b, _ := safetensors.EncodeFloat32s("BF16", g.gauss(rows*cols, std))
	shape := []int{rows, cols}
	if rows == 1 {
		shape = []int{cols}
	}
	g.put(name, "BF16", shape, b)
}

func (g *synth) norm(name string, n int) {
	v := g.gauss(n, 0.1)
	for i := range v {
		v[i] += 1
	}
	b, _ := safetensors.EncodeFloat32s("BF16", v)
	g.put(name, "BF16", []int{n}, b)
}

// linear writes a weight of std 1/sqrt(cols): FP8 with block scales when the
// checkpoint is quantized, else bf16. FP8 codes are drawn directly (sign,
// exponent 5..9, any mantissa), which is much faster than quantizing.
func (g *synth) linear(name string, rows, cols int) {
	blk := g.cfg.FP8Block
	if blk == nil {
		g.bf16(name, rows, cols, 1/math.Sqrt(float64(cols)))
		return
	}
	data := make([]byte, rows*cols)
	for i := range data {
		u := g.r.Uint32()
		data[i] = byte(u&0x80) | byte(5+u>>8%5)<<3 | byte(u>>16&7)
	}
	// Codes average about 1.5 in magnitude; scale to std ~1/sqrt(cols).
	e := int(math.Round(math.Log2(1 / (1.5 * math.Sqrt(float64(cols))))))
	scale := make([]byte, ceilDiv(rows, blk[0])*ceilDiv(cols, blk[1]))
	for i := range scale {
		scale[i] = byte(127 + e)
	}
	g.put(name, "F8_E4M3", []int{rows, cols}, data)
	g.put(name[:len(name)-len(".weight")]+".scale", "F8_E8M0", []int{ceilDiv(rows, blk[0]), ceilDiv(cols, blk[1])}, scale)
}

// expert writes a routed expert matrix: packed FP4 with per-32 scales when
// expert_dtype is fp4, else like linear.
func (g *synth) expert(name string, rows, cols int) {
	if g.cfg.ExpertDType != "fp4" {
		g.linear(name, rows, cols)
		return
	}
	data := make([]byte, rows*cols/2)
	for i := 0; i < len(data); i += 8 {
		u := g.r.Uint64()
		for j := 0; j < 8 && i+j < len(data); j++ {
			data[i+j] = byte(u >> (8 * j))
		}
	}
	// e2m1 codes average about 2.3 in magnitude.
	e := int(math.Round(math.Log2(1 / (2.3 * math.Sqrt(float64(cols))))))
	scale := make([]byte, rows*cols/32)
	for i := range scale {
		scale[i] = byte(127 + e)
	}
	g.put(name, "I8", []int{rows, cols / 2}, data)
	g.put(name[:len(name)-len(".weight")]+".scale", "F8_E8M0", []int{rows, cols / 32}, scale)
}

func (g *synth) head(p string) {
	hc, D := g.cfg.HCMult, g.cfg.Hidden
	g.f32(p+"hc_head_fn", []int{hc, hc * D}, g.gauss(hc*hc*D, 0.05))
	g.f32(p+"hc_head_base", []int{hc}, g.gauss(hc, 0.5))
	g.f32(p+"hc_head_scale", []int{1}, []float32{1})
	g.norm(p+"norm.weight", D)
}

func (g *synth) layer(p string, l LayerSpec) {
	c := g.cfg
	D, H, d, q, G, R := c.Hidden, c.Heads, c.HeadDim, c.QLoraRank, c.OGroups, c.OLoraRank
	hc := c.HCMult
	mix := (2 + hc) * hc
	g.norm(p+"attn_norm.weight", D)
	g.norm(p+"ffn_norm.weight", D)
	for _, site := range []string{"attn", "ffn"} {
		g.f32(p+"hc_"+site+"_fn", []int{mix, hc * D}, g.gauss(mix*hc*D, 0.05))
		g.f32(p+"hc_"+site+"_base", []int{mix}, g.gauss(mix, 0.5))
		g.f32(p+"hc_"+site+"_scale", []int{3}, []float32{1, 1, 1})
	}
	a := p + "attn."
	g.linear(a+"wq_a.weight", q, D)
	g.norm(a+"q_norm.weight", q)
	g.linear(a+"wq_b.weight", H*d, q)
	g.linear(a+"wkv.weight", d, D)
	g.norm(a+"kv_norm.weight", d)
	g.linear(a+"wo_a.weight", G*R, H*d/G)
	g.linear(a+"wo_b.weight", D, G*R)
	g.f32(a+"attn_sink", []int{H}, g.gauss(H, 0.5))
	comp := func(cp string, width, cw int) {
		g.bf16(cp+"wkv.weight", cw, D, 1/math.Sqrt(float64(D)))
		g.bf16(cp+"wgate.weight", cw, D, 1/math.Sqrt(float64(D)))
		g.f32(cp+"ape", []int{l.Rate, cw}, g.gauss(l.Rate*cw, 0.5))
		g.norm(cp+"norm.weight", width)
	}
	switch l.Attn {
	case HCA:
		comp(a+"compressor.", d, d)
	case CSA:
		comp(a+"compressor.", d, 2*d)
		comp(a+"indexer.compressor.", c.IndexHeadDim, 2*c.IndexHeadDim)
		g.linear(a+"indexer.wq_b.weight", c.IndexHeads*c.IndexHeadDim, q)
		g.bf16(a+"indexer.weights_proj.weight", c.IndexHeads, D, 1/math.Sqrt(float64(D)))
	}
	f := p + "ffn."
	E, I, K := c.Experts, c.MoEInter, c.ExpertsPerTok
	g.bf16(f+"gate.weight", E, D, 1/math.Sqrt(float64(D)))
	if l.Hash {
		ids := make([]int64, c.VocabSize*K)
		for t := range c.VocabSize {
			perm := g.r.Perm(E)
			for k := range K {
				ids[t*K+k] = int64(perm[k])
			}
		}
		b, _ := safetensors.EncodeInt64s("I64", ids)
		g.put(f+"gate.tid2eid", "I64", []int{c.VocabSize, K}, b)
	} else {
		g.f32(f+"gate.bias", []int{E}, g.gauss(E, 0.1))
	}
	g.linear(f+"shared_experts.w1.weight", I, D)
	g.linear(f+"shared_experts.w2.weight", D, I)
	g.linear(f+"shared_experts.w3.weight", I, D)
	for e := range E {
		ep := fmt.Sprintf("%sexperts.%d.", f, e)
		g.expert(ep+"w1.weight", I, D)
		g.expert(ep+"w2.weight", D, I)
		g.expert(ep+"w3.weight", I, D)
	}
}
