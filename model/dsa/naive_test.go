package dsa_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model/deepseekv32"
	"github.com/strata-inference/strata/model/dsa"
	"github.com/strata-inference/strata/model/glm5"
	"github.com/strata-inference/strata/quant"
	"github.com/strata-inference/strata/safetensors"
)

// This file checks the forward pass on shapes of its own against a
// float64 evaluation written from the spec (spec/models/deepseek-v3.2.md
// §2-§6, glm-5.md §2) that shares nothing with the backend ops: MLA in
// its expanded form (K and V per head), the indexer scored over every
// earlier position, routing by sorting.

// synthCase is a random-weight checkpoint of a config of its own.
type synthCase struct {
	family *dsa.Family
	cfg    map[string]any
	seed   uint64
	// bf16 stores the matrices in bf16 (their values then are bf16's).
	bf16 bool
}

// synthCases are shapes unlike the golden cases': other head counts and
// widths, a RoPE width that is not a power of two, YaRN with a softmax
// mscale, several shared experts, 3 routing groups keeping 2, a dense
// layer in the middle, and GLM-5 indexer sharing over two layers.
var synthCases = map[string]synthCase{
	"deepseek-v3.2": {family: &deepseekv32.Family, seed: 7, cfg: map[string]any{
		"model_type": "deepseek_v32", "vocab_size": 96, "hidden_size": 48, "intermediate_size": 40, "moe_intermediate_size": 6,
		"num_hidden_layers": 3, "mlp_layer_types": []string{"sparse", "dense", "sparse"},
		"num_attention_heads": 3, "q_lora_rank": 20, "kv_lora_rank": 24, "qk_nope_head_dim": 10, "qk_rope_head_dim": 6, "v_head_dim": 12,
		"n_routed_experts": 12, "num_experts_per_tok": 3, "n_shared_experts": 2, "n_group": 3, "topk_group": 2, "routed_scaling_factor": 1.5,
		"index_topk": 7, "index_head_dim": 10, "index_n_heads": 16, "rms_norm_eps": 1e-6, "max_position_embeddings": 256,
		"rope_parameters": map[string]any{"rope_type": "yarn", "rope_theta": 500.0, "factor": 2.0, "original_max_position_embeddings": 32,
			"mscale": 0.707, "mscale_all_dim": 0.707, "beta_fast": 16, "beta_slow": 1},
	}},
	"glm-5": {family: &glm5.Family, seed: 11, bf16: true, cfg: map[string]any{
		"model_type": "glm_moe_dsa", "vocab_size": 80, "hidden_size": 40, "intermediate_size": 56, "moe_intermediate_size": 10,
		"num_hidden_layers": 4, "first_k_dense_replace": 1, "indexer_types": []string{"full", "shared", "shared", "full"},
		"num_attention_heads": 2, "q_lora_rank": 24, "kv_lora_rank": 20, "qk_nope_head_dim": 14, "qk_rope_head_dim": 10, "v_head_dim": 8,
		"n_routed_experts": 6, "num_experts_per_tok": 2, "n_shared_experts": 1, "routed_scaling_factor": 2.5,
		"index_topk": 9, "index_head_dim": 12, "index_n_heads": 16, "rms_norm_eps": 1e-5, "max_position_embeddings": 256,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 10000.0},
	}},
}

// tensors is a checkpoint's values by name, with shapes.
type tensors struct {
	v     map[string][]float64
	shape map[string][]int
}

func (ts *tensors) mat(name string) [][]float64 {
	s := ts.shape[name]
	out := make([][]float64, s[0])
	for r := range out {
		out[r] = ts.v[name][r*s[1] : (r+1)*s[1]]
	}
	return out
}

// writeSynth writes the case's checkpoint into a temp dir and returns the
// dir and the values as stored.
func writeSynth(t testing.TB, sc synthCase) (string, *tensors) {
	t.Helper()
	cfgBytes, _ := json.Marshal(sc.cfg)
	c, err := dsa.ParseConfig(cfgBytes, sc.family)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sc.seed, 99))
	ts := &tensors{v: map[string][]float64{}, shape: map[string][]int{}}
	var wts []safetensors.WriteTensor
	add := func(name string, shape []int, gen func() float64, matrix bool) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(gen())
			if matrix && sc.bf16 {
				v[i] = quant.BF16ToFloat32(quant.Float32ToBF16(v[i]))
			}
		}
		w := safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape, Data: f32Bytes(v)}
		if matrix && sc.bf16 {
			w.DType, w.Data = safetensors.BF16, make([]byte, 2*n)
			quant.EncodeBF16(w.Data, v)
		}
		wts = append(wts, w)
		f := make([]float64, n)
		for i, x := range v {
			f[i] = float64(x)
		}
		ts.v[name], ts.shape[name] = f, shape
	}
	mat := func(name string, rows, cols int) {
		add(name, []int{rows, cols}, func() float64 { return rng.NormFloat64() / math.Sqrt(float64(cols)) }, true)
	}
	norm := func(name string, n int) {
		add(name, []int{n}, func() float64 { return 1 + 0.2*rng.NormFloat64() }, false)
	}
	vec := func(name string, n int, std float64) {
		add(name, []int{n}, func() float64 { return std * rng.NormFloat64() }, false)
	}
	D, V, H := c.Hidden, c.VocabSize, c.Heads
	add("model.embed_tokens.weight", []int{V, D}, func() float64 { return rng.NormFloat64() }, true)
	mat("lm_head.weight", V, D)
	norm("model.norm.weight", D)
	for l := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		norm(p+"input_layernorm.weight", D)
		norm(p+"post_attention_layernorm.weight", D)
		a := p + "self_attn."
		mat(a+"q_a_proj.weight", c.QLoraRank, D)
		norm(a+"q_a_layernorm.weight", c.QLoraRank)
		mat(a+"q_b_proj.weight", H*(c.NopeDim+c.RopeDim), c.QLoraRank)
		mat(a+"kv_a_proj_with_mqa.weight", c.KVLoraRank+c.RopeDim, D)
		norm(a+"kv_a_layernorm.weight", c.KVLoraRank)
		mat(a+"kv_b_proj.weight", H*(c.NopeDim+c.VDim), c.KVLoraRank)
		mat(a+"o_proj.weight", D, H*c.VDim)
		if c.FullIndexer[l] {
			x := a + "indexer."
			mat(x+"wq_b.weight", c.IndexHeads*c.IndexDim, c.QLoraRank)
			mat(x+"wk.weight", c.IndexDim, D)
			norm(x+"k_norm.weight", c.IndexDim)
			vec(x+"k_norm.bias", c.IndexDim, 0.1)
			mat(x+"weights_proj.weight", c.IndexHeads, D)
		}
		m := p + "mlp."
		swiglu := func(pre string, I int) {
			mat(pre+"gate_proj.weight", I, D)
			mat(pre+"up_proj.weight", I, D)
			mat(pre+"down_proj.weight", D, I)
		}
		if c.Dense[l] {
			swiglu(m, c.Intermediate)
			continue
		}
		mat(m+"gate.weight", c.Experts, D)
		vec(m+"gate.e_score_correction_bias", c.Experts, 0.1)
		for e := range c.Experts {
			swiglu(fmt.Sprintf("%sexperts.%d.", m, e), c.MoEInter)
		}
		swiglu(m+"shared_experts.", c.MoEInter*c.SharedExperts)
	}
	dir := t.TempDir()
	sort.SliceStable(wts, func(i, j int) bool { return wts[i].DType.Size() > wts[j].DType.Size() })
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), wts, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfgBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, ts
}

// naive evaluates the model on ids (positions 0..L-1) in float64 and
// returns the logits of every position and the smallest relative gap
// between the k-th and (k+1)-th candidate of any top-k choice it made
// (router, router groups, indexer), which a float32 implementation must
// not be sensitive to.
func naive(c *dsa.Config, ts *tensors, ids []int32) (logits [][]float64, gap float64) {
	gap = math.Inf(1)
	noteGap := func(sorted []float64, k int) {
		if k < len(sorted) {
			a, b := sorted[k-1], sorted[k]
			gap = min(gap, math.Abs(a-b)/max(math.Abs(a), 1))
		}
	}
	L, D, H := len(ids), c.Hidden, c.Heads
	n, r, dv, cl := c.NopeDim, c.RopeDim, c.VDim, c.KVLoraRank
	matvec := func(w [][]float64, x []float64) []float64 {
		y := make([]float64, len(w))
		for i, row := range w {
			for j, v := range row {
				y[i] += v * x[j]
			}
		}
		return y
	}
	rms := func(x, w []float64, eps float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(len(x))+eps)
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = w[i] * v * s
		}
		return y
	}
	// RoPE frequencies (spec §4), YaRN's ramp in float64.
	inv := make([]float64, r/2)
	for j := range inv {
		inv[j] = math.Pow(c.RopeTheta, -2*float64(j)/float64(r))
	}
	if y := c.Yarn; y != nil {
		corr := func(N float64) float64 {
			return float64(r) * math.Log(y.OriginalMax/(2*math.Pi*N)) / (2 * math.Log(c.RopeTheta))
		}
		low, high := math.Max(math.Floor(corr(y.BetaFast)), 0), math.Min(math.Ceil(corr(y.BetaSlow)), float64(r-1))
		if low == high {
			high += 0.001
		}
		for j := range inv {
			ramp := math.Min(math.Max((float64(j)-low)/(high-low), 0), 1)
			inv[j] = inv[j]/y.Factor*ramp + inv[j]*(1-ramp)
		}
	}
	// rotate rotates the first 2·len(inv) channels of x at position p:
	// pairs (2j, 2j+1), or (j, j+R/2) for rotate-half.
	rotate := func(x []float64, p int, half bool) {
		R := 2 * len(inv)
		for j, f := range inv {
			a, b := 2*j, 2*j+1
			if half {
				a, b = j, j+R/2
			}
			cs, sn := math.Cos(float64(p)*f), math.Sin(float64(p)*f)
			x[a], x[b] = x[a]*cs-x[b]*sn, x[b]*cs+x[a]*sn
		}
	}
	scale := 1 / math.Sqrt(float64(n+r))
	if y := c.Yarn; y != nil && y.MscaleAllDim != 0 {
		m := 0.1*y.MscaleAllDim*math.Log(y.Factor) + 1
		scale *= m * m
	}
	swiglu := func(pre string, x []float64) []float64 {
		g, u := matvec(ts.mat(pre+"gate_proj.weight"), x), matvec(ts.mat(pre+"up_proj.weight"), x)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		return matvec(ts.mat(pre+"down_proj.weight"), g)
	}

	emb := ts.mat("model.embed_tokens.weight")
	hs := make([][]float64, L)
	for t, id := range ids {
		hs[t] = slices.Clone(emb[id])
	}
	var sel [][]int // the latest full layer's selection per position
	for l := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		a := p + "self_attn."
		xs := make([][]float64, L)
		cq := make([][]float64, L)
		qs := make([][][]float64, L) // [t][h] = [nope | rope]
		lat, kpe := make([][]float64, L), make([][]float64, L)
		for t := range L {
			xs[t] = rms(hs[t], ts.v[p+"input_layernorm.weight"], c.RMSEps)
			cq[t] = rms(matvec(ts.mat(a+"q_a_proj.weight"), xs[t]), ts.v[a+"q_a_layernorm.weight"], 1e-6)
			q := matvec(ts.mat(a+"q_b_proj.weight"), cq[t])
			for h := range H {
				qh := slices.Clone(q[h*(n+r) : (h+1)*(n+r)])
				rotate(qh[n:], t, false)
				qs[t] = append(qs[t], qh)
			}
			kv := matvec(ts.mat(a+"kv_a_proj_with_mqa.weight"), xs[t])
			lat[t] = rms(kv[:cl], ts.v[a+"kv_a_layernorm.weight"], 1e-6)
			kpe[t] = slices.Clone(kv[cl:])
			rotate(kpe[t], t, false)
		}
		if c.FullIndexer[l] {
			x := a + "indexer."
			Hi, di := c.IndexHeads, c.IndexDim
			half := c.IndexerRope == dsa.Half
			qi, ki, wi := make([][]float64, L), make([][]float64, L), make([][]float64, L)
			for t := range L {
				qi[t] = matvec(ts.mat(x+"wq_b.weight"), cq[t])
				for h := range Hi {
					rotate(qi[t][h*di:(h+1)*di], t, half)
				}
				k := matvec(ts.mat(x+"wk.weight"), xs[t])
				var mean, vr float64
				for _, v := range k {
					mean += v / float64(di)
				}
				for _, v := range k {
					vr += (v - mean) * (v - mean) / float64(di)
				}
				for i := range k {
					k[i] = (k[i]-mean)/math.Sqrt(vr+1e-6)*ts.v[x+"k_norm.weight"][i] + ts.v[x+"k_norm.bias"][i]
				}
				rotate(k, t, half)
				ki[t] = k
				wi[t] = matvec(ts.mat(x+"weights_proj.weight"), xs[t])
			}
			sel = make([][]int, L)
			for t := range L {
				score := make([]float64, t+1)
				for s := range t + 1 {
					for h := range Hi {
						var d float64
						for i := range di {
							d += qi[t][h*di+i] * ki[s][i]
						}
						score[s] += wi[t][h] / math.Sqrt(float64(Hi)) * math.Max(d/math.Sqrt(float64(di)), 0)
					}
				}
				order := make([]int, t+1)
				for i := range order {
					order[i] = i
				}
				sort.SliceStable(order, func(i, j int) bool { return score[order[i]] > score[order[j]] })
				k := min(c.IndexTopK, t+1)
				sorted := make([]float64, len(order))
				for i, o := range order {
					sorted[i] = score[o]
				}
				noteGap(sorted, k)
				sel[t] = order[:k]
			}
		}
		kvb := ts.mat(a + "kv_b_proj.weight")
		for t := range L {
			knope := func(h, s int) []float64 { return matvec(kvb[h*(n+dv):h*(n+dv)+n], lat[s]) }
			val := func(h, s int) []float64 { return matvec(kvb[h*(n+dv)+n:(h+1)*(n+dv)], lat[s]) }
			o := make([]float64, 0, H*dv)
			for h := range H {
				lg := make([]float64, len(sel[t]))
				mx := math.Inf(-1)
				for i, s := range sel[t] {
					kn := knope(h, s)
					var d float64
					for j := range n {
						d += qs[t][h][j] * kn[j]
					}
					for j := range r {
						d += qs[t][h][n+j] * kpe[s][j]
					}
					lg[i] = d * scale
					mx = max(mx, lg[i])
				}
				var sum float64
				for i := range lg {
					lg[i] = math.Exp(lg[i] - mx)
					sum += lg[i]
				}
				oh := make([]float64, dv)
				for i, s := range sel[t] {
					for j, v := range val(h, s) {
						oh[j] += lg[i] / sum * v
					}
				}
				o = append(o, oh...)
			}
			y := matvec(ts.mat(a+"o_proj.weight"), o)
			for i := range D {
				hs[t][i] += y[i]
			}
		}
		m := p + "mlp."
		for t := range L {
			x := rms(hs[t], ts.v[p+"post_attention_layernorm.weight"], c.RMSEps)
			var y []float64
			if c.Dense[l] {
				y = swiglu(m, x)
			} else {
				E, G := c.Experts, c.Groups
				per := E / G
				s := matvec(ts.mat(m+"gate.weight"), x)
				choice := make([]float64, E)
				for e := range E {
					s[e] = 1 / (1 + math.Exp(-s[e]))
					choice[e] = s[e] + ts.v[m+"gate.e_score_correction_bias"][e]
				}
				type scored struct {
					i int
					v float64
				}
				best := func(xs []scored, k int) []scored {
					sort.SliceStable(xs, func(i, j int) bool { return xs[i].v > xs[j].v })
					sorted := make([]float64, len(xs))
					for i, x := range xs {
						sorted[i] = x.v
					}
					noteGap(sorted, k)
					return xs[:k]
				}
				var groups []scored
				for g := range G {
					v := slices.Clone(choice[g*per : (g+1)*per])
					slices.Sort(v)
					groups = append(groups, scored{g, v[per-1] + v[per-2]})
				}
				var cand []scored
				for _, g := range best(groups, c.TopGroups) {
					for e := g.i * per; e < (g.i+1)*per; e++ {
						cand = append(cand, scored{e, choice[e]})
					}
				}
				chosen := best(cand, c.ExpertsPerTok)
				var sum float64
				for _, e := range chosen {
					sum += s[e.i]
				}
				y = swiglu(m+"shared_experts.", x)
				for _, e := range chosen {
					w := s[e.i] / (sum + 1e-20) * c.RoutedScale
					for i, v := range swiglu(fmt.Sprintf("%sexperts.%d.", m, e.i), x) {
						y[i] += w * v
					}
				}
			}
			for i := range D {
				hs[t][i] += y[i]
			}
		}
	}
	head := ts.mat("lm_head.weight")
	for t := range L {
		logits = append(logits, matvec(head, rms(hs[t], ts.v["model.norm.weight"], c.RMSEps)))
	}
	return logits, gap
}

// TestAgainstNaive: on shapes of its own, every path (one pass, prefill
// then decode, uneven chunks) matches the float64 evaluation within 1e-4,
// with the selection active (more positions than index_topk). The
// indexers have 16 heads so that a key's score is rarely exactly 0 (every
// head's relu zero), which would tie at the top-k boundary.
func TestAgainstNaive(t *testing.T) {
	for name, sc := range synthCases {
		t.Run(name, func(t *testing.T) {
			dir, ts := writeSynth(t, sc)
			m := loadFamily(t, dir, sc.family)
			const L = 40
			rng := rand.New(rand.NewPCG(sc.seed, 5))
			ids := make([]int32, L)
			for i := range ids {
				ids[i] = int32(rng.IntN(m.VocabSize()))
			}
			want, gap := naive(m.Cfg, ts, ids)
			if gap < 1e-4 {
				t.Fatalf("the reference's top-k choices have a near-tie (relative gap %g): choose another seed", gap)
			}
			V := m.VocabSize()
			var scale float64
			for _, row := range want {
				for _, v := range row {
					scale = max(scale, math.Abs(v))
				}
			}
			for _, feeds := range [][]int{{L}, golden.DecodeFeeds(13, L), {5, 1, 17, 9, 8}} {
				got, err := golden.Feed(context.Background(), m, ids, feeds)
				if err != nil {
					t.Fatal(err)
				}
				var worst float64
				for p := range L {
					for v := range V {
						worst = max(worst, math.Abs(float64(got[p*V+v])-want[p][v]))
					}
				}
				t.Logf("feeds %v: max abs diff %.3g (logits up to %.2f, top-k gap %.2g)", feeds, worst, scale, gap)
				if worst > 1e-4 {
					t.Errorf("feeds %v: max abs diff %.3g from the float64 evaluation", feeds, worst)
				}
			}
		})
	}
}
