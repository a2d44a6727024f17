package gemma4

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/strata-inference/strata/safetensors"
)

// WriteSynthetic writes configJSON and a random-weight checkpoint for it
// into dir, in the naming the config's spelling loads (save_pretrained's
// model.*, or the Hub's model.language_model.*), every tensor as dtype (F32
// or BF16), one model.safetensors. Matrices are N(0, 1/fan_in), embeddings
// N(0, 1), norm weights and the router's scales 1 + N(0, 0.2), layer
// scalars U(0.6, 1.4): enough variety that a forward pass that ignores a
// weight is caught, and activations stay finite. The checkpoint is one
// shard for the embeddings and head and one per layer, with
// model.safetensors.index.json, so that writing a large model holds one
// layer at a time. It exists for tests and benchmarks of shapes no
// reference case has.
func WriteSynthetic(dir string, configJSON []byte, dtype safetensors.DType, seed uint64) error {
	cfg, err := ParseConfig(configJSON)
	if err != nil {
		return err
	}
	if dtype != safetensors.F32 && dtype != safetensors.BF16 {
		return fmt.Errorf("gemma4: synthetic weights as %s (want F32 or BF16)", dtype)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), configJSON, 0o644); err != nil {
		return err
	}
	g := &synth{dt: dtype, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	weightMap := map[string]string{}
	flush := func(file string) error {
		if g.err != nil {
			return g.err
		}
		for _, t := range g.out {
			weightMap[t.Name] = file
		}
		err := safetensors.WriteFile(filepath.Join(dir, file), g.out, nil)
		g.out = nil
		return err
	}
	D, V, L, P := cfg.Hidden, cfg.VocabSize, len(cfg.Layers), cfg.PLE
	pre := cfg.textPrefix()
	g.put(pre+"embed_tokens.weight", []int{V, D}, g.gauss(V*D, 1))
	if !cfg.TieEmbeddings {
		g.put("lm_head.weight", []int{V, D}, g.gauss(V*D, 1/math.Sqrt(float64(D))))
	}
	g.norm(pre+"norm.weight", D)
	if P > 0 {
		g.put(pre+"embed_tokens_per_layer.weight", []int{cfg.PLEVocab, L * P}, g.gauss(cfg.PLEVocab*L*P, 1))
		g.linear(pre+"per_layer_model_projection.weight", L*P, D)
		g.norm(pre+"per_layer_projection_norm.weight", P)
	}
	if err := flush("model-embed.safetensors"); err != nil {
		return err
	}
	for i, l := range cfg.Layers {
		p := fmt.Sprintf("%slayers.%d.", pre, i)
		for _, n := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
			g.norm(p+n+".weight", D)
		}
		g.put(p+"layer_scalar", []int{1}, []float32{float32(0.6 + 0.8*g.r.Float64())})
		a := p + "self_attn."
		g.linear(a+"q_proj.weight", cfg.Heads*l.HeadDim, D)
		g.norm(a+"q_norm.weight", l.HeadDim)
		g.linear(a+"o_proj.weight", D, cfg.Heads*l.HeadDim)
		if !l.Shared {
			g.linear(a+"k_proj.weight", l.KVHeads*l.HeadDim, D)
			g.norm(a+"k_norm.weight", l.HeadDim)
			if !l.KEqV {
				g.linear(a+"v_proj.weight", l.KVHeads*l.HeadDim, D)
			}
		}
		g.linear(p+"mlp.gate_proj.weight", l.Intermediate, D)
		g.linear(p+"mlp.up_proj.weight", l.Intermediate, D)
		g.linear(p+"mlp.down_proj.weight", D, l.Intermediate)
		if cfg.MoE {
			E, Ie := cfg.Experts, cfg.MoEInter
			g.linear(p+"router.proj.weight", E, D)
			g.norm(p+"router.scale", D)
			g.norm(p+"router.per_expert_scale", E)
			g.put(p+"experts.gate_up_proj", []int{E, 2 * Ie, D}, g.gauss(E*2*Ie*D, 1/math.Sqrt(float64(D))))
			g.put(p+"experts.down_proj", []int{E, D, Ie}, g.gauss(E*D*Ie, 1/math.Sqrt(float64(Ie))))
			for _, n := range []string{"pre_feedforward_layernorm_2", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2"} {
				g.norm(p+n+".weight", D)
			}
		}
		if P > 0 {
			g.linear(p+"per_layer_input_gate.weight", P, D)
			g.linear(p+"per_layer_projection.weight", D, P)
			g.norm(p+"post_per_layer_input_norm.weight", D)
		}
		if err := flush(fmt.Sprintf("model-layer%03d.safetensors", i)); err != nil {
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
	dt  safetensors.DType
	r   *rand.Rand
	out []safetensors.WriteTensor
	err error
}

func (g *synth) gauss(n int, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(g.r.NormFloat64() * std)
	}
	return v
}

func (g *synth) put(name string, shape []int, v []float32) {
	data, err := safetensors.EncodeFloat32s(g.dt, v)
	if err != nil && g.err == nil {
		g.err = fmt.Errorf("gemma4: synthetic %s: %w", name, err)
	}
	g.out = append(g.out, safetensors.WriteTensor{Name: name, DType: g.dt, Shape: shape, Data: data})
}

func (g *synth) linear(name string, rows, cols int) {
	g.put(name, []int{rows, cols}, g.gauss(rows*cols, 1/math.Sqrt(float64(cols))))
}

func (g *synth) norm(name string, n int) {
	v := g.gauss(n, 0.2)
	for i := range v {
		v[i]++
	}
	g.put(name, []int{n}, v)
}
