package hy4

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/quant"
	"github.com/strata-inference/strata/safetensors"
)

// This file checks the forward pass on shapes of its own against a
// float64 evaluation written from spec/models/hy4.md §2-§4 that shares
// nothing with the backend ops: iHC channel by channel, MLA in its
// expanded form (K and V per head) with rotate-half RoPE on the original
// channel order, the indexer scored over every earlier position, routing
// by sorting.

// synthCase is a random-weight checkpoint of a config of its own.
type synthCase struct {
	cfg  map[string]any
	seed uint64
	// bf16 stores the matrices in bf16; memNames writes transformers'
	// in-memory names and one expert triple per expert instead of the
	// checkpoint spelling with stacked experts.
	bf16, memNames bool
}

// synthCases are shapes unlike the golden case's: 3 channels with
// magnitude 1.5, a RoPE width that is not a power of two, 3 heads, two
// routing groups keeping one, two shared experts, a dense layer in the
// middle, the default indexer pattern (full at 0, 1 and 5) over 6 layers,
// the clamp active.
var synthCases = map[string]synthCase{
	"checkpoint-names": {seed: 3, cfg: map[string]any{
		"model_type": "hy_v4", "architectures": []string{"HYV4ForCausalLM"}, "vocab_size": 88, "hidden_size": 40, "intermediate_size": 48, "moe_intermediate_size": 8,
		"num_hidden_layers": 6, "mlp_layer_types": []string{"sparse", "dense", "sparse", "sparse", "dense", "sparse"},
		"num_attention_heads": 3, "num_key_value_heads": 3, "q_lora_rank": 20, "kv_lora_rank": 18, "qk_nope_head_dim": 10, "qk_rope_head_dim": 6, "v_head_dim": 12,
		"n_routed_experts": 6, "num_experts_per_tok": 2, "n_shared_experts": 2, "n_group": 2, "topk_group": 1, "routed_scaling_factor": 1.7,
		"index_topk": 7, "index_head_dim": 10, "index_n_heads": 16, "rms_norm_eps": 1e-5, "max_position_embeddings": 128,
		"hc_mult": 3, "hc_magnitude": 1.5, "hc_eps": 1e-3, "swiglu_limit": 0.4,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 500.0},
	}},
	"memory-names-bf16": {seed: 10, bf16: true, memNames: true, cfg: map[string]any{
		"model_type": "hy_v4", "vocab_size": 72, "hidden_size": 32, "intermediate_size": 40, "moe_intermediate_size": 6,
		"num_hidden_layers": 3, "mlp_layer_types": []string{"dense", "sparse", "sparse"}, "indexer_types": []string{"full", "shared", "full"},
		"num_attention_heads": 2, "q_lora_rank": 16, "kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 10,
		"n_routed_experts": 5, "num_experts_per_tok": 3, "n_shared_experts": 1, "routed_scaling_factor": 2.0, "norm_topk_prob": false,
		"index_topk": 9, "index_head_dim": 8, "index_n_heads": 16, "rms_norm_eps": 1e-6, "max_position_embeddings": 128,
		"hc_mult": 2, "swiglu_limit": 0.3,
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

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// writeSynth writes the case's checkpoint into a temp dir and returns the
// dir, the parsed config and the values as stored, always under their
// checkpoint names.
func writeSynth(t testing.TB, sc synthCase) (string, *Config, *tensors) {
	t.Helper()
	cfgBytes, _ := json.Marshal(sc.cfg)
	c, err := ParseConfig(cfgBytes)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(sc.seed, 99))
	ts := &tensors{v: map[string][]float64{}, shape: map[string][]int{}}
	var wts []safetensors.WriteTensor
	write := func(name string, shape []int, v []float32, matrix bool) {
		w := safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape, Data: f32Bytes(v)}
		if matrix && sc.bf16 {
			w.DType, w.Data = safetensors.BF16, make([]byte, 2*len(v))
			quant.EncodeBF16(w.Data, v)
		}
		wts = append(wts, w)
	}
	// add draws a tensor, records it under name and writes it under
	// stored (unless stored is "").
	add := func(name, stored string, shape []int, gen func() float64, matrix bool) []float32 {
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
		if stored != "" {
			write(stored, shape, v, matrix)
		}
		f := make([]float64, n)
		for i, x := range v {
			f[i] = float64(x)
		}
		ts.v[name], ts.shape[name] = f, shape
		return v
	}
	alt := func(save, mem string) string {
		if sc.memNames && mem != "" {
			return mem
		}
		return save
	}
	mat := func(name, mem string, rows, cols int) []float32 {
		return add(name, alt(name, mem), []int{rows, cols}, func() float64 { return rng.NormFloat64() / math.Sqrt(float64(cols)) }, true)
	}
	norm := func(name string, n int) {
		add(name, name, []int{n}, func() float64 { return 1 + 0.2*rng.NormFloat64() }, false)
	}
	vec := func(name, mem string, n int, mean, std float64) {
		add(name, alt(name, mem), []int{n}, func() float64 { return mean + std*rng.NormFloat64() }, false)
	}
	D, V, H, C := c.Hidden, c.VocabSize, c.Heads, c.HCMult
	add("model.embed_tokens.weight", "model.embed_tokens.weight", []int{V, D}, func() float64 { return rng.NormFloat64() }, true)
	mat("lm_head.weight", "lm_head.weight", V, D)
	norm("model.norm.weight", D)
	hc := func(save, mem string, rows int) {
		mat(save+"_fn", mem+"_fn", rows, C*D)
		vec(save+"_base", mem+"_base", rows, 0, 0.5)
		vec(save+"_scale", mem+"_scale", rows/C, 0.5, 0.5)
	}
	hc("model.hc_pre.hc_head.hc_head", "model.hc_head.hc", C)
	for l := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		mat(p+"hc_pre.hc_attn_layer.hc_fn", p+"attn_hc.fn", 2*C, C*D)
		vec(p+"hc_pre.hc_attn_layer.hc_base", p+"attn_hc.base", 2*C, 0, 0.5)
		vec(p+"hc_pre.hc_attn_layer.hc_scale", p+"attn_hc.scale", 2, 0.5, 0.5)
		mat(p+"hc_pre.hc_mlp_layer.hc_fn", p+"ffn_hc.fn", 2*C, C*D)
		vec(p+"hc_pre.hc_mlp_layer.hc_base", p+"ffn_hc.base", 2*C, 0, 0.5)
		vec(p+"hc_pre.hc_mlp_layer.hc_scale", p+"ffn_hc.scale", 2, 0.5, 0.5)
		norm(p+"input_layernorm.weight", D)
		norm(p+"post_attention_layernorm.weight", D)
		a := p + "self_attn."
		mat(a+"q_a_proj.weight", "", c.QLoraRank, D)
		norm(a+"q_a_layernorm.weight", c.QLoraRank)
		mat(a+"q_b_proj.weight", "", H*(c.NopeDim+c.RopeDim), c.QLoraRank)
		mat(a+"kv_a_proj_with_mqa.weight", "", c.KVLoraRank+c.RopeDim, D)
		norm(a+"kv_a_layernorm.weight", c.KVLoraRank)
		mat(a+"kv_b_proj.weight", "", H*(c.NopeDim+c.VDim), c.KVLoraRank)
		mat(a+"o_proj.weight", "", D, H*c.VDim)
		mat(a+"linear_gate.weight", a+"gate_proj.weight", H*c.VDim, D)
		vec(a+"learnable_sink_param", a+"sinks", H, 0.5, 1)
		if c.FullIndexer[l] {
			x := a + "indexer."
			mat(x+"wq_b.weight", "", c.IndexHeads*c.IndexDim, c.QLoraRank)
			mat(x+"wk.weight", "", c.IndexDim, D)
			norm(x+"k_norm.weight", c.IndexDim)
			vec(x+"k_norm.bias", "", c.IndexDim, 0, 0.1)
			mat(x+"weights_proj.weight", "", c.IndexHeads, D)
		}
		m := p + "mlp."
		swiglu := func(pre string, I int) {
			mat(pre+"linear_gate.weight", pre+"gate_proj.weight", I, D)
			mat(pre+"up_proj.weight", "", I, D)
			mat(pre+"down_proj.weight", "", D, I)
		}
		if c.Dense[l] {
			swiglu(m, c.Intermediate)
			continue
		}
		mat(m+"gate.weight", "", c.Experts, D)
		vec(m+"gate.e_score_correction_bias", "", c.Experts, 0, 0.1)
		E, I := c.Experts, c.MoEInter
		gu := make([]float32, 0, E*2*I*D)
		dn := make([]float32, 0, E*D*I)
		for e := range E {
			ep := fmt.Sprintf("%sexperts.%d.", m, e)
			store := func(s string) string {
				if sc.memNames {
					return s
				}
				return ""
			}
			g := add(ep+"gate_proj.weight", store(ep+"gate_proj.weight"), []int{I, D}, func() float64 { return rng.NormFloat64() / math.Sqrt(float64(D)) }, true)
			u := add(ep+"up_proj.weight", store(ep+"up_proj.weight"), []int{I, D}, func() float64 { return rng.NormFloat64() / math.Sqrt(float64(D)) }, true)
			d := add(ep+"down_proj.weight", store(ep+"down_proj.weight"), []int{D, I}, func() float64 { return rng.NormFloat64() / math.Sqrt(float64(I)) }, true)
			gu = append(append(gu, g...), u...)
			dn = append(dn, d...)
		}
		if !sc.memNames {
			write(m+"experts.gate_up_proj", []int{E, 2 * I, D}, gu, true)
			write(m+"experts.down_proj", []int{E, D, I}, dn, true)
		}
		swiglu(m+"shared_experts.", I*c.SharedExperts)
	}
	dir := t.TempDir()
	sort.SliceStable(wts, func(i, j int) bool { return wts[i].DType.Size() > wts[j].DType.Size() })
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), wts, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfgBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, c, ts
}

// naive evaluates the model on ids (positions 0..L-1) in float64 and
// returns the logits of every position and the smallest relative gap
// between the k-th and (k+1)-th candidate of any top-k choice it made
// (router, router groups, indexer), which a float32 implementation must
// not be sensitive to.
func naive(c *Config, ts *tensors, ids []int32) (logits [][]float64, gap float64) {
	gap = math.Inf(1)
	noteGap := func(sorted []float64, k int) {
		if k < len(sorted) {
			a, b := sorted[k-1], sorted[k]
			gap = min(gap, math.Abs(a-b)/max(math.Abs(a), 1))
		}
	}
	L, D, H, C := len(ids), c.Hidden, c.Heads, c.HCMult
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
	rmsFactor := func(x []float64, eps float64) float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		return 1 / math.Sqrt(ss/float64(len(x))+eps)
	}
	rms := func(x, w []float64, eps float64) []float64 {
		s := rmsFactor(x, eps)
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = w[i] * v * s
		}
		return y
	}
	sig := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	inv := make([]float64, r/2)
	for j := range inv {
		inv[j] = math.Pow(c.RopeTheta, -2*float64(j)/float64(r))
	}
	// rotate rotates the r channels of x at position p rotate-half:
	// channel j with j + r/2.
	rotate := func(x []float64, p int) {
		for j, f := range inv {
			a, b := j, j+r/2
			cs, sn := math.Cos(float64(p)*f), math.Sin(float64(p)*f)
			x[a], x[b] = x[a]*cs-x[b]*sn, x[b]*cs+x[a]*sn
		}
	}
	scale := 1 / math.Sqrt(float64(n+r))
	swiglu := func(pre string, x []float64, limit float64) []float64 {
		g, u := matvec(ts.mat(pre+"gate_proj.weight"), x), matvec(ts.mat(pre+"up_proj.weight"), x)
		for i := range g {
			gv, uv := min(g[i], limit), min(max(u[i], -limit), limit)
			g[i] = gv / (1 + math.Exp(-gv)) * uv
		}
		return matvec(ts.mat(pre+"down_proj.weight"), g)
	}
	dense := func(pre string, x []float64) []float64 {
		g, u := matvec(ts.mat(pre+"linear_gate.weight"), x), matvec(ts.mat(pre+"up_proj.weight"), x)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		return matvec(ts.mat(pre+"down_proj.weight"), g)
	}
	// mixer returns a token's pre and post weights from its channels X.
	mixer := func(prefix string, X [][]float64, rows int) (pre, post []float64) {
		f := slices.Concat(X...)
		mix := matvec(ts.mat(prefix+"_fn"), f)
		s := rmsFactor(f, c.RMSEps)
		sc, base := ts.v[prefix+"_scale"], ts.v[prefix+"_base"]
		for i := range C {
			pre = append(pre, sig(mix[i]*s*sc[0]+base[i])+c.HCEps)
		}
		if rows == 2*C {
			for i := range C {
				post = append(post, c.HCMagnitude*sig(mix[C+i]*s*sc[1]+base[C+i])+c.HCEps)
			}
		}
		return pre, post
	}
	collapse := func(pre []float64, X [][]float64) []float64 {
		x := make([]float64, D)
		for ch, w := range pre {
			for i := range D {
				x[i] += w * X[ch][i]
			}
		}
		return x
	}

	emb := ts.mat("model.embed_tokens.weight")
	Xs := make([][][]float64, L) // [t][channel][D]
	for t, id := range ids {
		for range C {
			Xs[t] = append(Xs[t], slices.Clone(emb[id]))
		}
	}
	var sel [][]int // the latest full layer's selection per position
	for l := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		a := p + "self_attn."
		xs := make([][]float64, L)
		posts := make([][]float64, L)
		cq := make([][]float64, L)
		qs := make([][][]float64, L) // [t][h] = [nope | rope]
		lat, kpe := make([][]float64, L), make([][]float64, L)
		for t := range L {
			pre, post := mixer(p+"hc_pre.hc_attn_layer.hc", Xs[t], 2*C)
			posts[t] = post
			xs[t] = rms(collapse(pre, Xs[t]), ts.v[p+"input_layernorm.weight"], c.RMSEps)
			cq[t] = rms(matvec(ts.mat(a+"q_a_proj.weight"), xs[t]), ts.v[a+"q_a_layernorm.weight"], 1e-6)
			q := matvec(ts.mat(a+"q_b_proj.weight"), cq[t])
			for h := range H {
				qh := slices.Clone(q[h*(n+r) : (h+1)*(n+r)])
				rotate(qh[n:], t)
				qs[t] = append(qs[t], qh)
			}
			kv := matvec(ts.mat(a+"kv_a_proj_with_mqa.weight"), xs[t])
			lat[t] = rms(kv[:cl], ts.v[a+"kv_a_layernorm.weight"], 1e-6)
			kpe[t] = slices.Clone(kv[cl:])
			rotate(kpe[t], t)
		}
		if c.FullIndexer[l] {
			x := a + "indexer."
			Hi, di := c.IndexHeads, c.IndexDim
			qi, ki, wi := make([][]float64, L), make([][]float64, L), make([][]float64, L)
			for t := range L {
				qi[t] = matvec(ts.mat(x+"wq_b.weight"), cq[t])
				for h := range Hi {
					rotate(qi[t][(h+1)*di-r:(h+1)*di], t) // RoPE part last
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
					k[i] = (k[i]-mean)/math.Sqrt(vr+c.RMSEps)*ts.v[x+"k_norm.weight"][i] + ts.v[x+"k_norm.bias"][i]
				}
				rotate(k[di-r:], t)
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
						score[s] += wi[t][h] / math.Sqrt(float64(Hi)) / math.Sqrt(float64(di)) * math.Max(d, 0)
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
		sinks := ts.v[a+"learnable_sink_param"]
		for t := range L {
			knope := func(h, s int) []float64 { return matvec(kvb[h*(n+dv):h*(n+dv)+n], lat[s]) }
			val := func(h, s int) []float64 { return matvec(kvb[h*(n+dv)+n:(h+1)*(n+dv)], lat[s]) }
			gate := matvec(ts.mat(a+"linear_gate.weight"), xs[t])
			o := make([]float64, 0, H*dv)
			for h := range H {
				lg := make([]float64, len(sel[t]))
				mx := sinks[h]
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
				sum := math.Exp(sinks[h] - mx)
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
				for j := range oh {
					oh[j] *= sig(gate[h*dv+j])
				}
				o = append(o, oh...)
			}
			y := matvec(ts.mat(a+"o_proj.weight"), o)
			for ch := range C {
				for i := range D {
					Xs[t][ch][i] += posts[t][ch] * y[i]
				}
			}
		}
		m := p + "mlp."
		for t := range L {
			pre, post := mixer(p+"hc_pre.hc_mlp_layer.hc", Xs[t], 2*C)
			x := rms(collapse(pre, Xs[t]), ts.v[p+"post_attention_layernorm.weight"], c.RMSEps)
			var y []float64
			if c.Dense[l] {
				y = dense(m, x)
			} else {
				E, G := c.Experts, c.Groups
				per := E / G
				s := matvec(ts.mat(m+"gate.weight"), x)
				choice := make([]float64, E)
				for e := range E {
					s[e] = sig(s[e])
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
				y = dense(m+"shared_experts.", x) // no clamp
				for _, e := range chosen {
					w := s[e.i] * c.RoutedScale
					if c.NormTopK {
						w = s[e.i] / (sum + 1e-20) * c.RoutedScale
					}
					for i, v := range swiglu(fmt.Sprintf("%sexperts.%d.", m, e.i), x, c.SwigluLimit) {
						y[i] += w * v
					}
				}
			}
			for ch := range C {
				for i := range D {
					Xs[t][ch][i] += post[ch] * y[i]
				}
			}
		}
	}
	head := ts.mat("lm_head.weight")
	for t := range L {
		pre, _ := mixer("model.hc_pre.hc_head.hc_head", Xs[t], C)
		logits = append(logits, matvec(head, rms(collapse(pre, Xs[t]), ts.v["model.norm.weight"], c.RMSEps)))
	}
	return logits, gap
}

// TestAgainstNaive: on shapes of its own, in both weight spellings, every
// path (one pass, prefill then decode, uneven chunks) matches the float64
// evaluation within 1e-4, with the selection active (more positions than
// index_topk) and the routed experts' clamp active.
func TestAgainstNaive(t *testing.T) {
	for name, sc := range synthCases {
		t.Run(name, func(t *testing.T) {
			dir, c, ts := writeSynth(t, sc)
			if c.HCMult == 4 || c.RopeDim == 8 {
				t.Fatalf("the case should differ from the golden shapes (C %d, r %d)", c.HCMult, c.RopeDim)
			}
			m, err := Load(dir, cpu.New(0), model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
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
			// The clamp changes the answer: without it the logits move.
			free := *m.Cfg
			free.SwigluLimit = math.Inf(1)
			unclamped, _ := naive(&free, ts, ids)
			var moved float64
			for p := range L {
				moved = max(moved, golden.MaxAbsDiff(f32s(unclamped[p]), f32s(want[p])))
			}
			if moved < 1e-2 {
				t.Fatalf("swiglu_limit %g is not active on this case (logits move by %g without it)", m.Cfg.SwigluLimit, moved)
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
				t.Logf("feeds %v: max abs diff %.3g (logits up to %.2f, top-k gap %.2g, clamp moves logits by %.2g)", feeds, worst, scale, gap, moved)
				if worst > 1e-4 {
					t.Errorf("feeds %v: max abs diff %.3g from the float64 evaluation", feeds, worst)
				}
			}
		})
	}
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
