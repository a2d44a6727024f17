package hy4

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/quant"
	"github.com/strata-inference/strata/safetensors"
)

// WriteSynthetic writes a random-weight checkpoint for the config.json
// configJSON into dir, in save_pretrained's naming (the checkpoint
// spelling, routed experts stacked): matrices bf16, norms, iHC bases and
// scales, sinks and routing vectors f32. It exists to serve and benchmark
// the architecture without a real checkpoint; the weights are scaled so
// activations stay finite, nothing more.
func WriteSynthetic(dir string, configJSON []byte, seed uint64) error {
	c, err := ParseConfig(configJSON)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), configJSON, 0o644); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []safetensors.WriteTensor
	bf16 := func(name string, shape []int, n int, std float64) {
		data := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(data[2*i:], quant.Float32ToBF16(float32(r.NormFloat64()*std)))
		}
		out = append(out, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: shape, Data: data})
	}
	mat := func(name string, rows, cols int, std float64) { bf16(name, []int{rows, cols}, rows*cols, std) }
	linear := func(name string, rows, cols int) { mat(name, rows, cols, 1/math.Sqrt(float64(cols))) }
	vec := func(name string, n int, mean, std float64) {
		data := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(mean+r.NormFloat64()*std)))
		}
		out = append(out, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: []int{n}, Data: data})
	}
	swiglu := func(p string, I int) {
		linear(p+"linear_gate.weight", I, c.Hidden)
		linear(p+"up_proj.weight", I, c.Hidden)
		linear(p+"down_proj.weight", c.Hidden, I)
	}
	D, H, C := c.Hidden, c.Heads, c.HCMult
	hc := func(p string, rows int) {
		linear(p+"_fn", rows, C*D)
		vec(p+"_base", rows, 0, 0.5)
		vec(p+"_scale", rows/C, 0.5, 0.1)
	}
	mat("model.embed_tokens.weight", c.VocabSize, D, 1)
	if !c.TieEmbeddings {
		linear("lm_head.weight", c.VocabSize, D)
	}
	vec("model.norm.weight", D, 1, 0.1)
	hc("model.hc_pre.hc_head.hc_head", C)
	for l := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		hc(p+"hc_pre.hc_attn_layer.hc", 2*C)
		hc(p+"hc_pre.hc_mlp_layer.hc", 2*C)
		vec(p+"input_layernorm.weight", D, 1, 0.1)
		vec(p+"post_attention_layernorm.weight", D, 1, 0.1)
		a := p + "self_attn."
		linear(a+"q_a_proj.weight", c.QLoraRank, D)
		vec(a+"q_a_layernorm.weight", c.QLoraRank, 1, 0.1)
		linear(a+"q_b_proj.weight", H*(c.NopeDim+c.RopeDim), c.QLoraRank)
		linear(a+"kv_a_proj_with_mqa.weight", c.KVLoraRank+c.RopeDim, D)
		vec(a+"kv_a_layernorm.weight", c.KVLoraRank, 1, 0.1)
		linear(a+"kv_b_proj.weight", H*(c.NopeDim+c.VDim), c.KVLoraRank)
		linear(a+"o_proj.weight", D, H*c.VDim)
		linear(a+"linear_gate.weight", H*c.VDim, D)
		vec(a+"learnable_sink_param", H, 0, 1)
		if c.FullIndexer[l] {
			x := a + "indexer."
			linear(x+"wq_b.weight", c.IndexHeads*c.IndexDim, c.QLoraRank)
			linear(x+"wk.weight", c.IndexDim, D)
			vec(x+"k_norm.weight", c.IndexDim, 1, 0.1)
			vec(x+"k_norm.bias", c.IndexDim, 0, 0.1)
			linear(x+"weights_proj.weight", c.IndexHeads, D)
		}
		m := p + "mlp."
		if c.Dense[l] {
			swiglu(m, c.Intermediate)
			continue
		}
		E, I := c.Experts, c.MoEInter
		linear(m+"gate.weight", E, D)
		vec(m+"gate.e_score_correction_bias", E, 0, 0.1)
		bf16(m+"experts.gate_up_proj", []int{E, 2 * I, D}, E*2*I*D, 1/math.Sqrt(float64(D)))
		bf16(m+"experts.down_proj", []int{E, D, I}, E*D*I, 1/math.Sqrt(float64(I)))
		swiglu(m+"shared_experts.", I*c.SharedExperts)
	}
	// F32 tensors first, as the reference writer orders them, so every
	// tensor stays aligned to its element size.
	var f32, rest []safetensors.WriteTensor
	for _, t := range out {
		if t.DType == safetensors.F32 {
			f32 = append(f32, t)
		} else {
			rest = append(rest, t)
		}
	}
	return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), append(f32, rest...), nil)
}
