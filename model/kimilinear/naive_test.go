package kimilinear

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/safetensors"
)

// This file checks the forward pass on a shape of its own against a
// float64 evaluation written from the spec (spec/models/kimi-linear.md
// §2-§5) that shares nothing with the backend ops: the checkpoint read by
// name, KDA's recurrence with the decay applied to the whole state, MLA in
// its expanded form (keys and values per head from kv_b_proj), routing by
// sorting.

// naiveConfig is unlike the golden case's: the released checkpoints'
// spelling (linear_attn_config with 1-based layer lists, aliases),
// a low-rank query, other head counts and widths (dk 8, conv 3), two dense
// layers first (first_k_dense_replace), 4 routing groups keeping 2, 2
// shared experts, top-3, renormalisation off.
var naiveConfig = map[string]any{
	"architectures": []string{"KimiLinearForCausalLM"}, "model_type": "kimi_linear",
	"vocab_size": 90, "hidden_size": 48, "intermediate_size": 40, "num_hidden_layers": 6,
	"linear_attn_config":  map[string]any{"full_attn_layers": []int{2, 5}, "kda_layers": []int{1, 3, 4, 6}, "num_heads": 3, "head_dim": 8, "short_conv_kernel_size": 3},
	"num_attention_heads": 3, "q_lora_rank": 16, "kv_lora_rank": 24, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 12,
	"num_local_experts": 8, "num_experts_per_tok": 3, "n_shared_experts": 2, "moe_intermediate_size": 8,
	"first_k_dense_replace": 2, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 1.7, "norm_topk_prob": false,
	"rms_norm_eps": 1e-6, "model_max_length": 512, "bos_token_id": 1, "eos_token_id": []int{2, 3},
}

// vals is a checkpoint's tensors as float64, by name.
type vals map[string][]float64

func readVals(t testing.TB, path string) vals {
	t.Helper()
	ck, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := vals{}
	for _, n := range ck.Names() {
		tt, _ := ck.Tensor(n)
		f, err := tt.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, len(f))
		for i, x := range f {
			v[i] = float64(x)
		}
		out[n] = v
	}
	return out
}

// mv is W·x for W [len(W)/len(x), len(x)] row-major.
func mv(W, x []float64) []float64 {
	n := len(x)
	y := make([]float64, len(W)/n)
	for r := range y {
		var s float64
		for j, v := range x {
			s += W[r*n+j] * v
		}
		y[r] = s
	}
	return y
}

func rms(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = v * inv
		if w != nil {
			y[i] *= w[i]
		}
	}
	return y
}

func sig(x float64) float64    { return 1 / (1 + math.Exp(-x)) }
func silu64(x float64) float64 { return x * sig(x) }

func swiglu64(v vals, p, gate, up, down string, x []float64) []float64 {
	g, u := mv(v[p+gate+".weight"], x), mv(v[p+up+".weight"], x)
	for i := range g {
		g[i] = silu64(g[i]) * u[i]
	}
	return mv(v[p+down+".weight"], g)
}

// naiveForward is the whole model over ids (one sequence from position 0)
// in float64: every position's logits.
func naiveForward(c *Config, v vals, ids []int32) [][]float64 {
	D, L := c.Hidden, len(ids)
	h := make([][]float64, L)
	for t, id := range ids {
		h[t] = slices.Clone(v["model.embed_tokens.weight"][int(id)*D : (int(id)+1)*D])
	}
	for l := range c.NumLayers() {
		p := fmt.Sprintf("model.layers.%d.", l)
		a := p + "self_attn."
		x := make([][]float64, L)
		for t := range L {
			x[t] = rms(h[t], v[p+"input_layernorm.weight"], c.RMSEps)
		}
		var y [][]float64
		if c.Layers[l] == KDA {
			y = naiveKDA(c, v, a, x)
		} else {
			y = naiveMLA(c, v, a, x)
		}
		for t := range L {
			for i := range D {
				h[t][i] += y[t][i]
			}
			xn := rms(h[t], v[p+"post_attention_layernorm.weight"], c.RMSEps)
			f := p + "block_sparse_moe."
			var o []float64
			if c.Dense[l] {
				o = swiglu64(v, f, "gate_proj", "up_proj", "down_proj", xn)
			} else {
				o = naiveMoE(c, v, f, xn)
			}
			for i := range D {
				h[t][i] += o[i]
			}
		}
	}
	out := make([][]float64, L)
	for t := range L {
		out[t] = mv(v["lm_head.weight"], rms(h[t], v["model.norm.weight"], c.RMSEps))
	}
	return out
}

func naiveKDA(c *Config, v vals, a string, x [][]float64) [][]float64 {
	L, Hl, dk, K := len(x), c.LinHeads, c.LinHeadDim, c.ConvKernel
	n := Hl * dk
	proj := map[string][][]float64{}
	for _, name := range []string{"q", "k", "v"} {
		raw := make([][]float64, L)
		for t := range L {
			raw[t] = mv(v[a+name+"_proj.weight"], x[t])
		}
		w := v[a+name+"_conv1d.weight"] // [n, 1, K]
		conv := make([][]float64, L)
		for t := range L {
			conv[t] = make([]float64, n)
			for ch := range n {
				var s float64
				for j := range K {
					if src := t - K + 1 + j; src >= 0 {
						s += w[ch*K+j] * raw[src][ch]
					}
				}
				conv[t][ch] = silu64(s)
			}
		}
		proj[name] = conv
	}
	S := make([][]float64, Hl) // [dk·dk] per head, row i = key channel i
	for hh := range S {
		S[hh] = make([]float64, dk*dk)
	}
	y := make([][]float64, L)
	for t := range L {
		f := mv(v[a+"f_b_proj.weight"], mv(v[a+"f_a_proj.weight"], x[t]))
		beta := mv(v[a+"b_proj.weight"], x[t])
		gate := mv(v[a+"g_b_proj.weight"], mv(v[a+"g_a_proj.weight"], x[t]))
		o := make([]float64, n)
		for hh := range Hl {
			l2 := func(z []float64, s float64) []float64 {
				var ss float64
				for _, e := range z {
					ss += e * e
				}
				r := make([]float64, len(z))
				for i, e := range z {
					r[i] = e / math.Sqrt(ss+1e-6) * s
				}
				return r
			}
			q := l2(proj["q"][t][hh*dk:(hh+1)*dk], 1/math.Sqrt(float64(dk)))
			k := l2(proj["k"][t][hh*dk:(hh+1)*dk], 1)
			vv := proj["v"][t][hh*dk : (hh+1)*dk]
			A := math.Exp(v[a+"A_log"][hh])
			b := sig(beta[hh])
			Sh := S[hh]
			for i := range dk {
				z := f[hh*dk+i] + v[a+"dt_bias"][hh*dk+i]
				g := -A * math.Log1p(math.Exp(z))
				for j := range dk {
					Sh[i*dk+j] *= math.Exp(g)
				}
			}
			for j := range dk {
				var pj float64
				for i := range dk {
					pj += Sh[i*dk+j] * k[i]
				}
				d := b * (vv[j] - pj)
				for i := range dk {
					Sh[i*dk+j] += k[i] * d
				}
			}
			oh := make([]float64, dk)
			for j := range dk {
				for i := range dk {
					oh[j] += Sh[i*dk+j] * q[i]
				}
			}
			oh = rms(oh, v[a+"o_norm.weight"], c.RMSEps)
			for j := range dk {
				o[hh*dk+j] = oh[j] * sig(gate[hh*dk+j])
			}
		}
		y[t] = mv(v[a+"o_proj.weight"], o)
	}
	return y
}

func naiveMLA(c *Config, v vals, a string, x [][]float64) [][]float64 {
	L, H, cr, nd, r, dv := len(x), c.Heads, c.KVLoraRank, c.NopeDim, c.RopeDim, c.VDim
	Q := make([][]float64, L)
	Kh := make([][]float64, L) // [H·(n+r)]
	V := make([][]float64, L)  // [H·dv]
	for t := range L {
		if c.QLoraRank > 0 {
			Q[t] = mv(v[a+"q_b_proj.weight"], rms(mv(v[a+"q_a_proj.weight"], x[t]), v[a+"q_a_layernorm.weight"], 1e-6))
		} else {
			Q[t] = mv(v[a+"q_proj.weight"], x[t])
		}
		kva := mv(v[a+"kv_a_proj_with_mqa.weight"], x[t])
		lat := rms(kva[:cr], v[a+"kv_a_layernorm.weight"], 1e-6)
		kpe := kva[cr:]
		kvb := mv(v[a+"kv_b_proj.weight"], lat)
		for hh := range H {
			Kh[t] = append(Kh[t], kvb[hh*(nd+dv):hh*(nd+dv)+nd]...)
			Kh[t] = append(Kh[t], kpe...)
			V[t] = append(V[t], kvb[hh*(nd+dv)+nd:(hh+1)*(nd+dv)]...)
		}
	}
	scale := 1 / math.Sqrt(float64(nd+r))
	y := make([][]float64, L)
	for t := range L {
		o := make([]float64, H*dv)
		for hh := range H {
			w := nd + r
			s := make([]float64, t+1)
			mx := math.Inf(-1)
			for u := range t + 1 {
				var d float64
				for i := range w {
					d += Q[t][hh*w+i] * Kh[u][hh*w+i]
				}
				s[u] = d * scale
				mx = max(mx, s[u])
			}
			var z float64
			for u := range s {
				s[u] = math.Exp(s[u] - mx)
				z += s[u]
			}
			for u := range s {
				for j := range dv {
					o[hh*dv+j] += s[u] / z * V[u][hh*dv+j]
				}
			}
		}
		y[t] = mv(v[a+"o_proj.weight"], o)
	}
	return y
}

func naiveMoE(c *Config, v vals, f string, x []float64) []float64 {
	E, k := c.Experts, c.ExpertsPerTok
	s := mv(v[f+"gate.weight"], x)
	choice := make([]float64, E)
	for e := range E {
		s[e] = sig(s[e])
		choice[e] = s[e] + v[f+"gate.e_score_correction_bias"][e]
	}
	// Group-limited: keep the topk_group groups with the largest sum of
	// their two best choices.
	per := E / c.Groups
	type gs struct {
		g int
		s float64
	}
	var groups []gs
	for g := range c.Groups {
		m := slices.Clone(choice[g*per : (g+1)*per])
		sort.Sort(sort.Reverse(sort.Float64Slice(m)))
		sum := m[0]
		if len(m) > 1 {
			sum += m[1]
		}
		groups = append(groups, gs{g, sum})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].s > groups[j].s })
	allowed := map[int]bool{}
	for _, g := range groups[:c.TopGroups] {
		allowed[g.g] = true
	}
	var cand []int
	for e := range E {
		if allowed[e/per] {
			cand = append(cand, e)
		}
	}
	sort.Slice(cand, func(i, j int) bool { return choice[cand[i]] > choice[cand[j]] })
	chosen := cand[:k]
	var sum float64
	for _, e := range chosen {
		sum += s[e]
	}
	y := swiglu64(v, f+"shared_experts.", "gate_proj", "up_proj", "down_proj", x)
	for _, e := range chosen {
		w := s[e]
		if c.NormTopK {
			w /= sum + 1e-20
		}
		w *= c.RoutedScale
		o := swiglu64(v, fmt.Sprintf("%sexperts.%d.", f, e), "w1", "w3", "w2", x)
		for i := range y {
			y[i] += w * o[i]
		}
	}
	return y
}

// TestAgainstNaive: on a shape of its own, with f32 and with bf16 weights
// (the naive evaluation reads the values as stored), the full pass, decode
// and a chunked feed match the float64 evaluation of the spec.
func TestAgainstNaive(t *testing.T) {
	for _, f32 := range []bool{true, false} {
		t.Run(fmt.Sprintf("f32=%v", f32), func(t *testing.T) { againstNaive(t, f32) })
	}
}

func againstNaive(t *testing.T, f32 bool) {
	dir := t.TempDir()
	b, _ := json.Marshal(naiveConfig)
	if err := WriteSynthetic(dir, b, SyntheticOptions{Seed: 21, F32: f32}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, cpu.New(0), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Cfg
	if !slices.Equal(c.Layers, []LayerKind{KDA, MLA, KDA, KDA, MLA, KDA}) || !slices.Equal(c.Dense, []bool{true, true, false, false, false, false}) {
		t.Fatalf("layers %v dense %v", c.Layers, c.Dense)
	}
	ids := make([]int32, 90)
	for i := range ids {
		ids[i] = int32((i*37 + 11) % c.VocabSize)
	}
	want := naiveForward(c, readVals(t, filepath.Join(dir, "model.safetensors")), ids)
	for _, feeds := range [][]int{{len(ids)}, golden.DecodeFeeds(20, len(ids)), {7, 64, 13, 6}} {
		got, err := golden.Feed(context.Background(), m, ids, feeds)
		if err != nil {
			t.Fatal(err)
		}
		var d, mag float64
		V := c.VocabSize
		for p := range ids {
			for j := range V {
				d = max(d, math.Abs(float64(got[p*V+j])-want[p][j]))
				mag = max(mag, math.Abs(want[p][j]))
			}
		}
		t.Logf("feeds %v: max abs diff %.3g (logits up to %.3g)", feeds[:min(3, len(feeds))], d, mag)
		if d > 1e-4 || mag < 0.5 {
			t.Errorf("feeds %v: max abs diff %.3g from float64 (logits up to %.3g)", feeds[:min(3, len(feeds))], d, mag)
		}
	}
}
