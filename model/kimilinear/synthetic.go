package kimilinear

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

// SyntheticOptions are how WriteSynthetic draws its weights.
type SyntheticOptions struct {
	Seed uint64
	// F32 stores the matrices as f32 (default bf16).
	F32 bool
	// LayerScale, when positive, multiplies every layer's output
	// projections (the mixers' o_proj and the FFNs' down projections), so
	// that the layers change the residual stream little: with tied
	// embeddings such a model mostly repeats its input token.
	LayerScale float64
}

// WriteSynthetic writes a random-weight checkpoint for the config.json
// configJSON into dir, in save_pretrained's naming: matrices bf16 (or f32),
// norms, decays, conv kernels and routing vectors f32.
// It exists to serve, test and benchmark the architecture without a real
// checkpoint; the weights are scaled so activations stay finite and the
// KDA decays are the golden case's (A = exp(A_log) ~ U(0.05, 1), dt_bias ~
// N(-1, 0.5): states that last tens of tokens), nothing more.
func WriteSynthetic(dir string, configJSON []byte, o SyntheticOptions) error {
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
	seed, f32 := o.Seed, o.F32
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []safetensors.WriteTensor
	mat := func(name string, rows, cols int, std float64) {
		if f32 {
			data := make([]byte, 4*rows*cols)
			for i := range rows * cols {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(r.NormFloat64()*std)))
			}
			out = append(out, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: []int{rows, cols}, Data: data})
			return
		}
		data := make([]byte, 2*rows*cols)
		for i := range rows * cols {
			binary.LittleEndian.PutUint16(data[2*i:], quant.Float32ToBF16(float32(r.NormFloat64()*std)))
		}
		out = append(out, safetensors.WriteTensor{Name: name, DType: safetensors.BF16, Shape: []int{rows, cols}, Data: data})
	}
	linear := func(name string, rows, cols int) { mat(name, rows, cols, 1/math.Sqrt(float64(cols))) }
	out1 := 1.0
	if o.LayerScale > 0 {
		out1 = o.LayerScale
	}
	outProj := func(name string, rows, cols int) { mat(name, rows, cols, out1/math.Sqrt(float64(cols))) }
	vals := func(name string, shape []int, gen func() float64) {
		n := 1
		for _, s := range shape {
			n *= s
		}
		data := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(gen())))
		}
		out = append(out, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape, Data: data})
	}
	vec := func(name string, n int, mean, std float64) {
		vals(name, []int{n}, func() float64 { return mean + r.NormFloat64()*std })
	}
	swiglu := func(p, gate, up, down string, I int) {
		linear(p+gate+".weight", I, c.Hidden)
		linear(p+up+".weight", I, c.Hidden)
		outProj(p+down+".weight", c.Hidden, I)
	}
	D, H := c.Hidden, c.Heads
	mat("model.embed_tokens.weight", c.VocabSize, D, 1)
	if !c.TieEmbeddings {
		linear("lm_head.weight", c.VocabSize, D)
	}
	vec("model.norm.weight", D, 1, 0.1)
	for l := range c.NumLayers() {
		p := fmt.Sprintf("model.layers.%d.", l)
		vec(p+"input_layernorm.weight", D, 1, 0.1)
		vec(p+"post_attention_layernorm.weight", D, 1, 0.1)
		a := p + "self_attn."
		if c.Layers[l] == KDA {
			Hl, dk, K := c.LinHeads, c.LinHeadDim, c.ConvKernel
			n := Hl * dk
			for _, x := range []string{"q", "k", "v"} {
				linear(a+x+"_proj.weight", n, D)
				vals(a+x+"_conv1d.weight", []int{n, 1, K}, func() float64 { return r.NormFloat64() / math.Sqrt(float64(K)) })
			}
			vals(a+"A_log", []int{1, 1, Hl, 1}, func() float64 { return math.Log(0.05 + 0.95*r.Float64()) })
			vec(a+"dt_bias", n, -1, 0.5)
			linear(a+"f_a_proj.weight", dk, D)
			linear(a+"f_b_proj.weight", n, dk)
			linear(a+"b_proj.weight", Hl, D)
			linear(a+"g_a_proj.weight", dk, D)
			linear(a+"g_b_proj.weight", n, dk)
			vec(a+"o_norm.weight", dk, 1, 0.1)
			outProj(a+"o_proj.weight", D, n)
		} else {
			if q := c.QLoraRank; q > 0 {
				linear(a+"q_a_proj.weight", q, D)
				vec(a+"q_a_layernorm.weight", q, 1, 0.1)
				linear(a+"q_b_proj.weight", H*(c.NopeDim+c.RopeDim), q)
			} else {
				linear(a+"q_proj.weight", H*(c.NopeDim+c.RopeDim), D)
			}
			linear(a+"kv_a_proj_with_mqa.weight", c.KVLoraRank+c.RopeDim, D)
			vec(a+"kv_a_layernorm.weight", c.KVLoraRank, 1, 0.1)
			linear(a+"kv_b_proj.weight", H*(c.NopeDim+c.VDim), c.KVLoraRank)
			outProj(a+"o_proj.weight", D, H*c.VDim)
		}
		m := p + "block_sparse_moe."
		if c.Dense[l] {
			swiglu(m, "gate_proj", "up_proj", "down_proj", c.Intermediate)
			continue
		}
		linear(m+"gate.weight", c.Experts, D)
		vec(m+"gate.e_score_correction_bias", c.Experts, 0, 0.1)
		for e := range c.Experts {
			swiglu(fmt.Sprintf("%sexperts.%d.", m, e), "w1", "w3", "w2", c.MoEInter)
		}
		swiglu(m+"shared_experts.", "gate_proj", "up_proj", "down_proj", c.MoEInter*c.SharedExperts)
	}
	// F32 tensors first, so every tensor stays aligned to its element size.
	var first, rest []safetensors.WriteTensor
	for _, t := range out {
		if t.DType == safetensors.F32 {
			first = append(first, t)
		} else {
			rest = append(rest, t)
		}
	}
	return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), append(first, rest...), nil)
}
