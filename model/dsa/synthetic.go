package dsa

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

// WriteSynthetic writes a random-weight checkpoint of family f for the
// config.json configJSON into dir, in save_pretrained's naming: matrices
// bf16 (norm and routing vectors f32), one expert triple per expert. It
// exists to serve and benchmark the architecture without a real
// checkpoint; the weights are scaled so activations stay finite, nothing
// more.
func WriteSynthetic(dir string, configJSON []byte, f *Family, seed uint64) error {
	c, err := ParseConfig(configJSON, f)
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
	mat := func(name string, rows, cols int, std float64) {
		data := make([]byte, 2*rows*cols)
		for i := range rows * cols {
			binary.LittleEndian.PutUint16(data[2*i:], quant.Float32ToBF16(float32(r.NormFloat64()*std)))
		}
		out = append(out, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: []int{rows, cols}, Data: data})
	}
	linear := func(name string, rows, cols int) { mat(name, rows, cols, 1/math.Sqrt(float64(cols))) }
	vec := func(name string, n int, mean, std float64) {
		data := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(mean+r.NormFloat64()*std)))
		}
		out = append(out, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: []int{n}, Data: data})
	}
	swiglu := func(p string, I int) {
		linear(p+"gate_proj.weight", I, c.Hidden)
		linear(p+"up_proj.weight", I, c.Hidden)
		linear(p+"down_proj.weight", c.Hidden, I)
	}
	D, H := c.Hidden, c.Heads
	mat("model.embed_tokens.weight", c.VocabSize, D, 1)
	if !c.TieEmbeddings {
		linear("lm_head.weight", c.VocabSize, D)
	}
	vec("model.norm.weight", D, 1, 0.1)
	for l := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
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
		linear(m+"gate.weight", c.Experts, D)
		vec(m+"gate.e_score_correction_bias", c.Experts, 0, 0.1)
		for e := range c.Experts {
			swiglu(fmt.Sprintf("%sexperts.%d.", m, e), c.MoEInter)
		}
		swiglu(m+"shared_experts.", c.MoEInter*c.SharedExperts)
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
