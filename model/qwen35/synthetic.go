package qwen35

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/safetensors"
)

// SyntheticOptions shape a synthetic checkpoint.
type SyntheticOptions struct {
	// DType is how matrices are stored: F32 (the default) or BF16.
	// Vectors are F32.
	DType safetensors.DType
	Seed  uint64
	// LayerScale multiplies every layer's output projections (o_proj,
	// out_proj, down_proj; 0 means 1): how much the layers change the
	// residual stream against the embeddings. With a tied head and a small
	// scale the model mostly repeats its input token, and the MTP module
	// (whose fc starts from the identity on its embedding half) drafts
	// that repetition: tests of speculative decoding get drafts both
	// accepted and rejected.
	LayerScale float64
}

// WriteSynthetic writes a random-weight checkpoint for the config
// configJSON (either spelling) into dir: config.json as given and
// model.safetensors with every tensor Bind expects, the MTP module
// included when the config has mtp_num_hidden_layers, under the naming of
// the config's spelling (model.language_model.* for the Hub's multimodal
// config, model.* for the text-only one). It exists to run realistic cache
// shapes and the MTP head without a real checkpoint; the weights are
// scaled so activations stay finite, nothing more.
func WriteSynthetic(dir string, configJSON []byte, o SyntheticOptions) error {
	c, err := ParseConfig(configJSON)
	if err != nil {
		return err
	}
	dt := o.DType
	if dt == "" {
		dt = "F32"
	}
	if dt != "F32" && dt != "BF16" {
		return fmt.Errorf("qwen35: synthetic weights as %s (want F32 or BF16)", dt)
	}
	if o.LayerScale == 0 {
		o.LayerScale = 1
	}
	seed := o.Seed
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), configJSON, 0o644); err != nil {
		return err
	}
	g := &synth{c: c, dt: dt, out1: o.LayerScale, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	prefix := "model."
	if c.Multimodal {
		prefix = "model.language_model."
	}
	D := c.Hidden
	g.mat(prefix+"embed_tokens.weight", c.VocabSize, D, 1)
	if !c.TieEmbeddings {
		g.mat("lm_head.weight", c.VocabSize, D, 1/math.Sqrt(float64(D)))
	}
	g.norm(prefix+"norm.weight", D)
	for l, k := range c.Layers {
		g.layer(fmt.Sprintf("%slayers.%d.", prefix, l), k)
	}
	if c.MTPLayers > 0 {
		fc := g.gauss(2*D*D, 1/math.Sqrt(float64(2*D)), 0)
		for i := range D {
			fc[i*2*D+i] += 1 // the identity on the embedding half
		}
		g.put("mtp.fc.weight", g.dt, []int{D, 2 * D}, fc)
		g.norm("mtp.pre_fc_norm_embedding.weight", D)
		g.norm("mtp.pre_fc_norm_hidden.weight", D)
		g.norm("mtp.norm.weight", D)
		for l := range c.MTPLayers {
			g.layer(fmt.Sprintf("mtp.layers.%d.", l), Full)
		}
	}
	if g.err != nil {
		return g.err
	}
	return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), g.out, map[string]string{"synthetic": "true"})
}

type synth struct {
	c    *Config
	dt   safetensors.DType
	out1 float64 // LayerScale
	r    *rand.Rand
	out  []safetensors.WriteTensor
	err  error
}

func (g *synth) put(name string, dt safetensors.DType, shape []int, v []float32) {
	b, err := safetensors.EncodeFloat32s(dt, v)
	if err != nil && g.err == nil {
		g.err = err
	}
	g.out = append(g.out, safetensors.WriteTensor{Name: name, DType: dt, Shape: shape, Data: b})
}

func (g *synth) gauss(n int, std, mean float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(mean + g.r.NormFloat64()*std)
	}
	return v
}

func (g *synth) mat(name string, rows, cols int, std float64) {
	g.put(name, g.dt, []int{rows, cols}, g.gauss(rows*cols, std, 0))
}

func (g *synth) linear(name string, rows, cols int) {
	g.mat(name, rows, cols, 1/math.Sqrt(float64(cols)))
}

// output is a layer's output projection, scaled by LayerScale.
func (g *synth) output(name string, rows, cols int) {
	g.mat(name, rows, cols, g.out1/math.Sqrt(float64(cols)))
}

// norm is a 1+w norm's w, around 0.
func (g *synth) norm(name string, n int) { g.put(name, "F32", []int{n}, g.gauss(n, 0.1, 0)) }

func (g *synth) mlp(p string, I int) {
	D := g.c.Hidden
	g.linear(p+"gate_proj.weight", I, D)
	g.linear(p+"up_proj.weight", I, D)
	g.output(p+"down_proj.weight", D, I)
}

func (g *synth) layer(p string, k LayerKind) {
	c := g.c
	D := c.Hidden
	g.norm(p+"input_layernorm.weight", D)
	g.norm(p+"post_attention_layernorm.weight", D)
	switch k {
	case Full:
		a := p + "self_attn."
		g.linear(a+"q_proj.weight", c.Heads*2*c.HeadDim, D)
		g.linear(a+"k_proj.weight", c.KVHeads*c.HeadDim, D)
		g.linear(a+"v_proj.weight", c.KVHeads*c.HeadDim, D)
		g.output(a+"o_proj.weight", D, c.Heads*c.HeadDim)
		g.norm(a+"q_norm.weight", c.HeadDim)
		g.norm(a+"k_norm.weight", c.HeadDim)
	case Linear:
		a := p + "linear_attn."
		C, Hv := c.ConvDim(), c.LinValueHeads
		g.linear(a+"in_proj_qkv.weight", C, D)
		g.linear(a+"in_proj_z.weight", c.ValueDim(), D)
		g.linear(a+"in_proj_b.weight", Hv, D)
		g.linear(a+"in_proj_a.weight", Hv, D)
		g.put(a+"conv1d.weight", "F32", []int{C, 1, c.ConvKernel}, g.gauss(C*c.ConvKernel, 1/math.Sqrt(float64(c.ConvKernel)), 0))
		aLog := make([]float32, Hv)
		for i := range aLog {
			aLog[i] = float32(math.Log(0.05 + 0.95*g.r.Float64())) // decays from slow to fast
		}
		g.put(a+"A_log", "F32", []int{Hv}, aLog)
		g.put(a+"dt_bias", "F32", []int{Hv}, g.gauss(Hv, 0.5, -1))
		g.put(a+"norm.weight", "F32", []int{c.LinValueDim}, g.gauss(c.LinValueDim, 0.1, 1))
		g.output(a+"out_proj.weight", D, c.ValueDim())
	}
	f := p + "mlp."
	if !c.MoE {
		g.mlp(f, c.Intermediate)
		return
	}
	g.linear(f+"gate.weight", c.Experts, D)
	for e := range c.Experts {
		g.mlp(fmt.Sprintf("%sexperts.%d.", f, e), c.MoEInter)
	}
	g.mlp(f+"shared_expert.", c.SharedInter)
	g.linear(f+"shared_expert_gate.weight", 1, D)
}
