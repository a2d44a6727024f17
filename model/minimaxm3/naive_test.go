package minimaxm3

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/safetensors"
)

// This file checks the forward pass on a shape of its own against a
// float64 evaluation written from the spec (spec/models/minimax-m3.md
// §2-§5) that shares nothing with the backend ops: the block mask built
// densely per query and head from max-pooled indexer scores, attention
// with that mask, routing by sorting.

// naiveConfig is unlike the golden case's: the indexer has fewer heads
// than the KV heads (so a KV group's query heads read two selections),
// two local blocks, 3 of up to 10 blocks kept, a RoPE width not a power
// of two, a dense layer between MoE layers, a sparse first layer.
var naiveConfig = map[string]any{
	"model_type": "minimax_m3_vl_text", "architectures": []string{"MiniMaxM3VLForCausalLM"},
	"vocab_size": 96, "hidden_size": 48, "num_hidden_layers": 4,
	"layer_types":         []string{"minimax_m3_sparse", "full_attention", "minimax_m3_sparse", "minimax_m3_sparse"},
	"mlp_layer_types":     []string{"sparse", "dense", "sparse", "sparse"},
	"num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 12,
	"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
	"index_n_heads":   2, "index_head_dim": 10, "index_block_size": 8, "index_topk_blocks": 3, "index_local_blocks": 2,
	"dense_intermediate_size": 40, "intermediate_size": 10, "shared_intermediate_size": 8,
	"num_local_experts": 6, "num_experts_per_tok": 3, "routed_scaling_factor": 1.5,
	"swiglu_alpha": 1.5, "swiglu_limit": 2.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 512,
	"tie_word_embeddings": false, "bos_token_id": nil, "eos_token_id": nil,
}

// vals reads every tensor of the checkpoint in dir as float64.
func vals(t *testing.T, dir string) map[string][]float64 {
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := map[string][]float64{}
	for _, n := range ck.Names() {
		tn, _ := ck.Tensor(n)
		v, err := tn.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		f := make([]float64, len(v))
		for i, x := range v {
			f[i] = float64(x)
		}
		out[n] = f
	}
	return out
}

// naive evaluates the spec in float64 over ids at positions 0..n-1 and
// returns the logits of every position.
func naive(c *Config, w map[string][]float64, ids []int32) [][]float64 {
	D, n := c.Hidden, len(ids)
	mv := func(m []float64, x []float64, rows int) []float64 {
		cols := len(m) / rows
		y := make([]float64, rows)
		for r := range rows {
			for j := range cols {
				y[r] += m[r*cols+j] * x[j]
			}
		}
		return y
	}
	rms := func(x, wt []float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+c.RMSEps)
		y := make([]float64, len(x))
		for i := range x {
			y[i] = x[i] * inv * (1 + wt[i])
		}
		return y
	}
	R := c.RopeDim
	rope := func(x []float64, p int) {
		for j := range R / 2 {
			f := 1 / math.Pow(c.RopeTheta, float64(2*j)/float64(R))
			cs, sn := math.Cos(float64(p)*f), math.Sin(float64(p)*f)
			a, b := x[j], x[j+R/2]
			x[j], x[j+R/2] = a*cs-b*sn, b*cs+a*sn
		}
	}
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	act := func(g, u float64) float64 {
		L := c.SwigluLimit
		g = min(g, L)
		u = min(max(u, -L), L)
		return (u + 1) * g * sig(c.SwigluAlpha*g)
	}
	// glu evaluates down·act(gate_up x) with gate_up [2I, D].
	glu := func(gu, down, x []float64) []float64 {
		I := len(gu) / D / 2
		z := mv(gu, x, 2*I)
		h := make([]float64, I)
		for i := range I {
			h[i] = act(z[i], z[I+i])
		}
		return mv(down, h, D)
	}
	h := make([][]float64, n)
	for s, id := range ids {
		h[s] = append([]float64(nil), w["model.embed_tokens.weight"][int(id)*D:(int(id)+1)*D]...)
	}
	Hq, Hkv, d := c.Heads, c.KVHeads, c.HeadDim
	for l := range c.NumLayers() {
		p := fmt.Sprintf("model.layers.%d.", l)
		a := p + "self_attn."
		x := make([][]float64, n)
		q, k, v := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for s := range n {
			x[s] = rms(h[s], w[p+"input_layernorm.weight"])
			q[s], k[s], v[s] = mv(w[a+"q_proj.weight"], x[s], Hq*d), mv(w[a+"k_proj.weight"], x[s], Hkv*d), mv(w[a+"v_proj.weight"], x[s], Hkv*d)
			for hh := range Hq {
				copy(q[s][hh*d:], rms(q[s][hh*d:(hh+1)*d], w[a+"q_norm.weight"]))
				rope(q[s][hh*d:(hh+1)*d], s)
			}
			for hh := range Hkv {
				copy(k[s][hh*d:], rms(k[s][hh*d:(hh+1)*d], w[a+"k_norm.weight"]))
				rope(k[s][hh*d:(hh+1)*d], s)
			}
		}
		// keep[s][h][t]: whether query s's head h sees key t.
		Hi, di, B := c.IndexHeads, c.IndexDim, c.IndexBlock
		keep := func(s, hh, t int) bool { return t <= s }
		if c.Sparse[l] {
			qi, ki := make([][]float64, n), make([][]float64, n)
			for s := range n {
				qi[s] = mv(w[a+"indexer.q_proj.weight"], x[s], Hi*di)
				for hh := range Hi {
					copy(qi[s][hh*di:], rms(qi[s][hh*di:(hh+1)*di], w[a+"indexer.q_norm.weight"]))
					rope(qi[s][hh*di:(hh+1)*di], s)
				}
				ki[s] = rms(mv(w[a+"indexer.k_proj.weight"], x[s], di), w[a+"indexer.k_norm.weight"])
				rope(ki[s], s)
			}
			kept := make([][]map[int]bool, n)
			for s := range n {
				kept[s] = make([]map[int]bool, Hi)
				nb := s/B + 1
				for hh := range Hi {
					bs := make([]float64, nb)
					for b := range bs {
						bs[b] = math.Inf(-1)
					}
					for t := 0; t <= s; t++ {
						var sc float64
						for j := range di {
							sc += qi[s][hh*di+j] * ki[t][j]
						}
						bs[t/B] = max(bs[t/B], sc)
					}
					for j := range c.IndexLocal {
						bs[max(0, s/B-j)] = math.Inf(1)
					}
					order := make([]int, nb)
					for i := range order {
						order[i] = i
					}
					sort.SliceStable(order, func(i, j int) bool { return bs[order[i]] > bs[order[j]] })
					kept[s][hh] = map[int]bool{}
					for _, b := range order[:min(nb, c.IndexTopK)] {
						kept[s][hh][b] = true
					}
				}
			}
			keep = func(s, hh, t int) bool { return t <= s && kept[s][hh/(Hq/Hi)][t/B] }
		}
		for s := range n {
			o := make([]float64, Hq*d)
			for hh := range Hq {
				g := hh / (Hq / Hkv)
				var ts []int
				var sc []float64
				mx := math.Inf(-1)
				for t := 0; t <= s; t++ {
					if !keep(s, hh, t) {
						continue
					}
					var z float64
					for j := range d {
						z += q[s][hh*d+j] * k[t][g*d+j]
					}
					z /= math.Sqrt(float64(d))
					ts, sc = append(ts, t), append(sc, z)
					mx = max(mx, z)
				}
				var den float64
				for i := range sc {
					sc[i] = math.Exp(sc[i] - mx)
					den += sc[i]
				}
				for i, t := range ts {
					for j := range d {
						o[hh*d+j] += sc[i] / den * v[t][g*d+j]
					}
				}
			}
			y := mv(w[a+"o_proj.weight"], o, D)
			for i := range D {
				h[s][i] += y[i]
			}
		}
		for s := range n {
			xf := rms(h[s], w[p+"post_attention_layernorm.weight"])
			var y []float64
			if !c.MoE[l] {
				y = glu(w[p+"mlp.gate_up_proj.weight"], w[p+"mlp.down_proj.weight"], xf)
			} else {
				E, Ie := c.Experts, c.MoEInter
				lg := mv(w[p+"mlp.gate.weight"], xf, E)
				sc, bias := make([]float64, E), w[p+"mlp.gate.e_score_correction_bias"]
				order := make([]int, E)
				for e := range E {
					sc[e], order[e] = sig(lg[e]), e
				}
				sort.SliceStable(order, func(i, j int) bool { return sc[order[i]]+bias[order[i]] > sc[order[j]]+bias[order[j]] })
				top := order[:c.ExpertsPerTok]
				var den float64
				for _, e := range top {
					den += sc[e]
				}
				y = glu(w[p+"mlp.shared_experts.gate_up_proj.weight"], w[p+"mlp.shared_experts.down_proj.weight"], xf)
				gu, dn := w[p+"mlp.experts.gate_up_proj"], w[p+"mlp.experts.down_proj"]
				for _, e := range top {
					ye := glu(gu[e*2*Ie*D:(e+1)*2*Ie*D], dn[e*D*Ie:(e+1)*D*Ie], xf)
					for i := range D {
						y[i] += c.RoutedScale * sc[e] / den * ye[i]
					}
				}
			}
			for i := range D {
				h[s][i] += y[i]
			}
		}
	}
	out := make([][]float64, n)
	for s := range n {
		out[s] = mv(w["lm_head.weight"], rms(h[s], w["model.norm.weight"]), c.VocabSize)
	}
	return out
}

// TestNaive: the model's logits on a shape of its own, over 80 tokens (10
// blocks, 3 kept), against the float64 evaluation of the spec, through one
// pass and through decode.
func TestNaive(t *testing.T) {
	dir := t.TempDir()
	cfgJSON, _ := json.Marshal(naiveConfig)
	if err := WriteSynthetic(dir, cfgJSON, safetensors.F32, 5); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ids := make([]int32, 80)
	for i := range ids {
		ids[i] = int32((i*37 + i*i*11 + 5) % m.Cfg.VocabSize)
	}
	want := naive(m.Cfg, vals(t, dir), ids)
	ctx := context.Background()
	for _, feeds := range [][]int{{len(ids)}, golden.DecodeFeeds(20, len(ids))} {
		got, err := golden.Feed(ctx, m, ids, feeds)
		if err != nil {
			t.Fatal(err)
		}
		V := m.VocabSize()
		worst, scale := 0.0, 0.0
		for s := range ids {
			for j := range V {
				worst = max(worst, math.Abs(float64(got[s*V+j])-want[s][j]))
				scale = max(scale, math.Abs(want[s][j]))
			}
		}
		t.Logf("feeds of %d: max abs diff %.3g (logits up to %.3g)", len(feeds), worst, scale)
		if worst > 1e-4 {
			t.Errorf("feeds of %d: max abs diff %g from the float64 evaluation", len(feeds), worst)
		}
	}
}
