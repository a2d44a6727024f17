package minimaxm3

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
// into dir: in save_pretrained's naming for a text config, in the Hub's
// (language_model.model.*, block_sparse_moe with per-expert w1/w3/w2,
// self_attn.index_*) for the multimodal one; every tensor as dtype (F32
// or BF16). Matrices are N(0, 1/fan_in), embeddings N(0, 1), norm weights
// N(0, 0.2) (the forward multiplies by 1+w), score biases N(0, 0.1):
// enough variety that a forward pass that ignores a weight is caught, and
// activations stay finite. The checkpoint is one shard for the embeddings
// and head and one per layer, with model.safetensors.index.json, so that
// writing a large model holds one layer at a time. It exists for tests,
// serving checks and benchmarks of shapes no reference case has.
func WriteSynthetic(dir string, configJSON []byte, dtype safetensors.DType, seed uint64) error {
	cfg, err := ParseConfig(configJSON)
	if err != nil {
		return err
	}
	if dtype != safetensors.F32 && dtype != safetensors.BF16 {
		return fmt.Errorf("minimaxm3: synthetic weights as %s (want F32 or BF16)", dtype)
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
	hub := cfg.Multimodal
	pre, head := "model.", "lm_head.weight"
	if hub {
		pre, head = "language_model.model.", "language_model.lm_head.weight"
	}
	D, V := cfg.Hidden, cfg.VocabSize
	g.put(pre+"embed_tokens.weight", []int{V, D}, g.gauss(V*D, 1))
	if !cfg.TieEmbeddings {
		g.linear(head, V, D)
	}
	g.norm(pre+"norm.weight", D)
	if err := flush("model-embed.safetensors"); err != nil {
		return err
	}
	glu := func(prefix string, I int) {
		if hub {
			g.linear(prefix+"gate_proj.weight", I, D)
			g.linear(prefix+"up_proj.weight", I, D)
		} else {
			g.linear(prefix+"gate_up_proj.weight", 2*I, D)
		}
		g.linear(prefix+"down_proj.weight", D, I)
	}
	for l := range cfg.NumLayers() {
		p := fmt.Sprintf("%slayers.%d.", pre, l)
		g.norm(p+"input_layernorm.weight", D)
		g.norm(p+"post_attention_layernorm.weight", D)
		a := p + "self_attn."
		Hq, Hkv, d := cfg.Heads, cfg.KVHeads, cfg.HeadDim
		g.linear(a+"q_proj.weight", Hq*d, D)
		g.linear(a+"k_proj.weight", Hkv*d, D)
		g.linear(a+"v_proj.weight", Hkv*d, D)
		g.linear(a+"o_proj.weight", D, Hq*d)
		g.norm(a+"q_norm.weight", d)
		g.norm(a+"k_norm.weight", d)
		if cfg.Sparse[l] {
			x := a + "indexer."
			if hub {
				x = a + "index_"
			}
			g.linear(x+"q_proj.weight", cfg.IndexHeads*cfg.IndexDim, D)
			g.linear(x+"k_proj.weight", cfg.IndexDim, D)
			g.norm(x+"q_norm.weight", cfg.IndexDim)
			g.norm(x+"k_norm.weight", cfg.IndexDim)
		}
		E, Ie := cfg.Experts, cfg.MoEInter
		switch {
		case !cfg.MoE[l]:
			glu(p+"mlp.", cfg.DenseInter)
		case hub:
			q := p + "block_sparse_moe."
			g.linear(q+"gate.weight", E, D)
			g.put(q+"e_score_correction_bias", []int{E}, g.gauss(E, 0.1))
			for e := range E {
				x := fmt.Sprintf("%sexperts.%d.", q, e)
				g.linear(x+"w1.weight", Ie, D)
				g.linear(x+"w3.weight", Ie, D)
				g.linear(x+"w2.weight", D, Ie)
			}
			glu(q+"shared_experts.", cfg.SharedInter)
		default:
			q := p + "mlp."
			g.linear(q+"gate.weight", E, D)
			g.put(q+"gate.e_score_correction_bias", []int{E}, g.gauss(E, 0.1))
			g.put(q+"experts.gate_up_proj", []int{E, 2 * Ie, D}, g.gauss(E*2*Ie*D, 1/math.Sqrt(float64(D))))
			g.put(q+"experts.down_proj", []int{E, D, Ie}, g.gauss(E*D*Ie, 1/math.Sqrt(float64(Ie))))
			glu(q+"shared_experts.", cfg.SharedInter)
		}
		if err := flush(fmt.Sprintf("model-layer%03d.safetensors", l)); err != nil {
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
		g.err = fmt.Errorf("minimaxm3: synthetic %s: %w", name, err)
	}
	g.out = append(g.out, safetensors.WriteTensor{Name: name, DType: g.dt, Shape: shape, Data: data})
}

func (g *synth) linear(name string, rows, cols int) {
	g.put(name, []int{rows, cols}, g.gauss(rows*cols, 1/math.Sqrt(float64(cols))))
}

func (g *synth) norm(name string, n int) { g.put(name, []int{n}, g.gauss(n, 0.2)) }
