package qwen35

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/safetensors"
)

// naiveShape is a text-only Qwen3.5 config for the float64 reference below.
type naiveShape struct {
	moe                  bool
	vocab, d             int
	layers               []string
	hq, hkv, hd          int
	partial              float64
	hk, hv, dk, dv, conv int
	inter                int
	experts, topk, ie    int
	is                   int
	tied                 bool
	mtp                  bool // an MTP module (mtp.*) with one layer
}

func (s naiveShape) config() map[string]any {
	c := map[string]any{
		"model_type": "qwen3_5_text", "vocab_size": s.vocab, "hidden_size": s.d,
		"num_hidden_layers": len(s.layers), "layer_types": s.layers,
		"num_attention_heads": s.hq, "num_key_value_heads": s.hkv, "head_dim": s.hd,
		"linear_num_key_heads": s.hk, "linear_num_value_heads": s.hv,
		"linear_key_head_dim": s.dk, "linear_value_head_dim": s.dv, "linear_conv_kernel_dim": s.conv,
		"rms_norm_eps": 1e-6, "tie_word_embeddings": s.tied,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": s.partial},
	}
	if s.mtp {
		c["mtp_num_hidden_layers"] = 1
	}
	if s.moe {
		c["model_type"] = "qwen3_5_moe_text"
		c["num_experts"], c["num_experts_per_tok"] = s.experts, s.topk
		c["moe_intermediate_size"], c["shared_expert_intermediate_size"] = s.ie, s.is
	} else {
		c["intermediate_size"] = s.inter
	}
	return c
}

// randomCheckpoint writes a random checkpoint of shape s in save_pretrained
// naming (spec §6) and returns its folder and the tensors as float64.
func randomCheckpoint(t *testing.T, s naiveShape, seed uint64) (string, map[string][]float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	w := map[string][]float64{}
	var ts []safetensors.WriteTensor
	add := func(name string, shape []int, gen func() float64) {
		n := 1
		for _, x := range shape {
			n *= x
		}
		v := make([]float64, n)
		data := make([]byte, 4*n)
		for i := range v {
			f := float32(gen())
			v[i] = float64(f)
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(f))
		}
		w[name] = v
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: "F32", Shape: shape, Data: data})
	}
	mat := func(name string, rows, cols int) {
		sd := 1 / math.Sqrt(float64(cols))
		add(name, []int{rows, cols}, func() float64 { return r.NormFloat64() * sd })
	}
	norm := func(name string, n int) { add(name, []int{n}, func() float64 { return 0.2 * r.NormFloat64() }) }
	mlp := func(p string, inter int) {
		mat(p+"gate_proj.weight", inter, s.d)
		mat(p+"up_proj.weight", inter, s.d)
		mat(p+"down_proj.weight", s.d, inter)
	}
	add("model.embed_tokens.weight", []int{s.vocab, s.d}, r.NormFloat64)
	if !s.tied {
		mat("lm_head.weight", s.vocab, s.d)
	}
	norm("model.norm.weight", s.d)
	convDim := 2*s.hk*s.dk + s.hv*s.dv
	layer := func(p, kind string) {
		norm(p+"input_layernorm.weight", s.d)
		norm(p+"post_attention_layernorm.weight", s.d)
		if kind == "full_attention" {
			a := p + "self_attn."
			mat(a+"q_proj.weight", s.hq*2*s.hd, s.d)
			mat(a+"k_proj.weight", s.hkv*s.hd, s.d)
			mat(a+"v_proj.weight", s.hkv*s.hd, s.d)
			mat(a+"o_proj.weight", s.d, s.hq*s.hd)
			norm(a+"q_norm.weight", s.hd)
			norm(a+"k_norm.weight", s.hd)
		} else {
			g := p + "linear_attn."
			mat(g+"in_proj_qkv.weight", convDim, s.d)
			mat(g+"in_proj_z.weight", s.hv*s.dv, s.d)
			mat(g+"in_proj_b.weight", s.hv, s.d)
			mat(g+"in_proj_a.weight", s.hv, s.d)
			add(g+"conv1d.weight", []int{convDim, 1, s.conv}, func() float64 { return r.NormFloat64() / math.Sqrt(float64(s.conv)) })
			add(g+"A_log", []int{s.hv}, func() float64 { return math.Log(0.05 + r.Float64()) })
			add(g+"dt_bias", []int{s.hv}, func() float64 { return -1 + 0.5*r.NormFloat64() })
			add(g+"norm.weight", []int{s.dv}, func() float64 { return 1 + 0.2*r.NormFloat64() })
			mat(g+"out_proj.weight", s.d, s.hv*s.dv)
		}
		f := p + "mlp."
		if !s.moe {
			mlp(f, s.inter)
			return
		}
		mat(f+"gate.weight", s.experts, s.d)
		for e := range s.experts {
			mlp(fmt.Sprintf("%sexperts.%d.", f, e), s.ie)
		}
		mlp(f+"shared_expert.", s.is)
		mat(f+"shared_expert_gate.weight", 1, s.d)
	}
	for l, kind := range s.layers {
		layer(fmt.Sprintf("model.layers.%d.", l), kind)
	}
	if s.mtp {
		mat("mtp.fc.weight", s.d, 2*s.d)
		norm("mtp.pre_fc_norm_embedding.weight", s.d)
		norm("mtp.pre_fc_norm_hidden.weight", s.d)
		norm("mtp.norm.weight", s.d)
		layer("mtp.layers.0.", "full_attention")
	}
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(s.config())
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, w
}

// naiveForward is spec/models/qwen3.5-moe.md computed from its formulas in
// float64, for one sequence, every token at once, the delta rule token by
// token. It returns the logits of every position.
func naiveForward(s naiveShape, w map[string][]float64, ids []int32) []float64 {
	logits, _ := naiveForwardHidden(s, w, ids)
	return logits
}

// naiveForwardHidden is naiveForward that also returns every position's
// final hidden state after the final norm (what the MTP module reads).
func naiveForwardHidden(s naiveShape, w map[string][]float64, ids []int32) ([]float64, [][]float64) {
	D := s.d
	h := make([][]float64, len(ids))
	for t, id := range ids {
		h[t] = append([]float64(nil), w["model.embed_tokens.weight"][int(id)*D:(int(id)+1)*D]...)
	}
	for l, kind := range s.layers {
		naiveLayer(s, w, fmt.Sprintf("model.layers.%d.", l), kind, h)
	}
	var logits []float64
	var hidden [][]float64
	for t := range h {
		x := naiveRMS(h[t], w["model.norm.weight"], true)
		hidden = append(hidden, x)
		logits = append(logits, naiveHead(s, w, x)...)
	}
	return logits, hidden
}

// naiveMTP is the MTP module (mtp.go's doc, read from vLLM's
// Qwen3_5MultiTokenPredictor) in float64 over positions 0..len(next)-1:
// position t reads hidden[t] and the embedding of next[t] (the token at
// t+1) and returns the logits for the token at t+2, and its normed output
// (which stands for the hidden state at t+1 when drafting further).
func naiveMTP(s naiveShape, w map[string][]float64, hidden [][]float64, next []int32) ([]float64, [][]float64) {
	D := s.d
	h := make([][]float64, len(next))
	for t, id := range next {
		e := naiveRMS(w["model.embed_tokens.weight"][int(id)*D:(int(id)+1)*D], w["mtp.pre_fc_norm_embedding.weight"], true)
		x := append(e, naiveRMS(hidden[t], w["mtp.pre_fc_norm_hidden.weight"], true)...)
		h[t] = naiveMatvec(w, "mtp.fc.weight", x, D)
	}
	naiveLayer(s, w, "mtp.layers.0.", "full_attention", h)
	var logits []float64
	var out [][]float64
	for t := range h {
		x := naiveRMS(h[t], w["mtp.norm.weight"], true)
		out = append(out, x)
		logits = append(logits, naiveHead(s, w, x)...)
	}
	return logits, out
}

func naiveHead(s naiveShape, w map[string][]float64, x []float64) []float64 {
	head := "lm_head.weight"
	if s.tied {
		head = "model.embed_tokens.weight"
	}
	return naiveMatvec(w, head, x, s.vocab)
}

func naiveMatvec(w map[string][]float64, name string, x []float64, rows int) []float64 {
	m := w[name]
	cols := len(x)
	y := make([]float64, rows)
	for i := range rows {
		for j := range cols {
			y[i] += m[i*cols+j] * x[j]
		}
	}
	return y
}

func naiveRMS(x, wt []float64, onePlus bool) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+1e-6)
	y := make([]float64, len(x))
	for i, v := range x {
		g := wt[i]
		if onePlus {
			g = 1 + g
		}
		y[i] = v * inv * g
	}
	return y
}

// naiveLayer runs decoder layer p (of the given kind) over the residual
// streams h of positions 0..len(h)-1 in place.
func naiveLayer(s naiveShape, w map[string][]float64, p, kind string, h [][]float64) {
	L, D := len(h), s.d
	matvec := func(name string, x []float64, rows int) []float64 { return naiveMatvec(w, name, x, rows) }
	rms := naiveRMS
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	silu := func(x float64) float64 { return x * sig(x) }
	swiglu := func(p string, x []float64, inter int) []float64 {
		g, u := matvec(p+"gate_proj.weight", x, inter), matvec(p+"up_proj.weight", x, inter)
		for i := range g {
			g[i] = silu(g[i]) * u[i]
		}
		return matvec(p+"down_proj.weight", g, D)
	}
	R := int(float64(s.hd) * s.partial)
	{
		x := make([][]float64, L)
		for t := range L {
			x[t] = rms(h[t], w[p+"input_layernorm.weight"], true)
		}
		out := make([][]float64, L)
		if kind == "full_attention" {
			a := p + "self_attn."
			qs, gs, ks, vs := make([][]float64, L), make([][]float64, L), make([][]float64, L), make([][]float64, L)
			rope := func(v []float64, pos int) {
				for j := range R / 2 {
					ang := float64(pos) * math.Pow(10000, -float64(2*j)/float64(R))
					c, sn := math.Cos(ang), math.Sin(ang)
					x1, x2 := v[j], v[j+R/2]
					v[j], v[j+R/2] = x1*c-x2*sn, x2*c+x1*sn
				}
			}
			for t := range L {
				qg := matvec(a+"q_proj.weight", x[t], s.hq*2*s.hd)
				k := matvec(a+"k_proj.weight", x[t], s.hkv*s.hd)
				v := matvec(a+"v_proj.weight", x[t], s.hkv*s.hd)
				q := make([]float64, s.hq*s.hd)
				gate := make([]float64, s.hq*s.hd)
				for hh := range s.hq {
					copy(q[hh*s.hd:], rms(qg[hh*2*s.hd:hh*2*s.hd+s.hd], w[a+"q_norm.weight"], true))
					copy(gate[hh*s.hd:], qg[hh*2*s.hd+s.hd:(hh+1)*2*s.hd])
					rope(q[hh*s.hd:(hh+1)*s.hd], t)
				}
				for hh := range s.hkv {
					copy(k[hh*s.hd:], rms(k[hh*s.hd:(hh+1)*s.hd], w[a+"k_norm.weight"], true))
					rope(k[hh*s.hd:(hh+1)*s.hd], t)
				}
				qs[t], gs[t], ks[t], vs[t] = q, gate, k, v
			}
			for t := range L {
				o := make([]float64, s.hq*s.hd)
				for hh := range s.hq {
					kv := hh / (s.hq / s.hkv)
					sc := make([]float64, t+1)
					mx := math.Inf(-1)
					for j := range t + 1 {
						for c := range s.hd {
							sc[j] += qs[t][hh*s.hd+c] * ks[j][kv*s.hd+c]
						}
						sc[j] /= math.Sqrt(float64(s.hd))
						mx = max(mx, sc[j])
					}
					var sum float64
					for j := range sc {
						sc[j] = math.Exp(sc[j] - mx)
						sum += sc[j]
					}
					for j := range sc {
						for c := range s.hd {
							o[hh*s.hd+c] += sc[j] / sum * vs[j][kv*s.hd+c]
						}
					}
				}
				for i := range o {
					o[i] *= sig(gs[t][i])
				}
				out[t] = matvec(a+"o_proj.weight", o, D)
			}
		} else {
			g := p + "linear_attn."
			C := 2*s.hk*s.dk + s.hv*s.dv
			qkv := make([][]float64, L)
			for t := range L {
				qkv[t] = matvec(g+"in_proj_qkv.weight", x[t], C)
			}
			S := make([]float64, s.hv*s.dk*s.dv)
			for t := range L {
				mixed := make([]float64, C)
				for c := range C {
					for j := range s.conv {
						if src := t - (s.conv - 1) + j; src >= 0 {
							mixed[c] += w[g+"conv1d.weight"][c*s.conv+j] * qkv[src][c]
						}
					}
					mixed[c] = silu(mixed[c])
				}
				z := matvec(g+"in_proj_z.weight", x[t], s.hv*s.dv)
				bb := matvec(g+"in_proj_b.weight", x[t], s.hv)
				aa := matvec(g+"in_proj_a.weight", x[t], s.hv)
				y := make([]float64, s.hv*s.dv)
				for hh := range s.hv {
					kh := hh / (s.hv / s.hk)
					l2 := func(v []float64, sc float64) []float64 {
						var ss float64
						for _, e := range v {
							ss += e * e
						}
						out := make([]float64, len(v))
						for i, e := range v {
							out[i] = e / math.Sqrt(ss+1e-6) * sc
						}
						return out
					}
					q := l2(mixed[kh*s.dk:(kh+1)*s.dk], 1/math.Sqrt(float64(s.dk)))
					k := l2(mixed[s.hk*s.dk+kh*s.dk:s.hk*s.dk+(kh+1)*s.dk], 1)
					v := mixed[2*s.hk*s.dk+hh*s.dv : 2*s.hk*s.dk+(hh+1)*s.dv]
					beta := sig(bb[hh])
					sp := aa[hh] + w[g+"dt_bias"][hh]
					sp = math.Log1p(math.Exp(sp))
					decay := math.Exp(-math.Exp(w[g+"A_log"][hh]) * sp)
					Sh := S[hh*s.dk*s.dv : (hh+1)*s.dk*s.dv]
					for i := range Sh {
						Sh[i] *= decay
					}
					for j := range s.dv {
						var pred float64
						for i := range s.dk {
							pred += Sh[i*s.dv+j] * k[i]
						}
						delta := beta * (v[j] - pred)
						for i := range s.dk {
							Sh[i*s.dv+j] += k[i] * delta
						}
					}
					o := make([]float64, s.dv)
					for j := range s.dv {
						for i := range s.dk {
							o[j] += Sh[i*s.dv+j] * q[i]
						}
					}
					o = rms(o, w[g+"norm.weight"], false)
					for j := range o {
						y[hh*s.dv+j] = o[j] * silu(z[hh*s.dv+j])
					}
				}
				out[t] = matvec(g+"out_proj.weight", y, D)
			}
		}
		for t := range L {
			for i := range D {
				h[t][i] += out[t][i]
			}
			x2 := rms(h[t], w[p+"post_attention_layernorm.weight"], true)
			var f []float64
			if !s.moe {
				f = swiglu(p+"mlp.", x2, s.inter)
			} else {
				logits := matvec(p+"mlp.gate.weight", x2, s.experts)
				mx := math.Inf(-1)
				for _, v := range logits {
					mx = max(mx, v)
				}
				var sum float64
				prob := make([]float64, s.experts)
				for e, v := range logits {
					prob[e] = math.Exp(v - mx)
					sum += prob[e]
				}
				chosen := make([]bool, s.experts)
				var top []int
				for range s.topk {
					best := -1
					for e := range prob {
						if !chosen[e] && (best < 0 || prob[e] > prob[best]) {
							best = e
						}
					}
					chosen[best] = true
					top = append(top, best)
				}
				var tsum float64
				for _, e := range top {
					tsum += prob[e]
				}
				f = make([]float64, D)
				for _, e := range top {
					y := swiglu(fmt.Sprintf("%smlp.experts.%d.", p, e), x2, s.ie)
					for i := range f {
						f[i] += prob[e] / tsum * y[i]
					}
				}
				sh := swiglu(p+"mlp.shared_expert.", x2, s.is)
				gate := sig(matvec(p+"mlp.shared_expert_gate.weight", x2, 1)[0])
				for i := range f {
					f[i] += gate * sh[i]
				}
			}
			for i := range D {
				h[t][i] += f[i]
			}
		}
	}
}

// TestNaiveShapes runs two models of shapes unlike the golden cases' (dk ≠
// dv, one key head for three value heads, a 2-tap and a 5-tap conv, half
// and quarter rotary widths with 3 and 1 KV heads, tied embeddings, 5
// experts top 3) on random weights against the float64 reference above,
// along one feed, token by token, and chunks crossing the 64-token chunks.
func TestNaiveShapes(t *testing.T) {
	shapes := []naiveShape{
		{vocab: 97, d: 48, layers: []string{"linear_attention", "full_attention", "linear_attention", "linear_attention", "full_attention"},
			hq: 6, hkv: 3, hd: 16, partial: 0.5, hk: 1, hv: 3, dk: 8, dv: 12, conv: 2, inter: 40, tied: true},
		{moe: true, vocab: 50, d: 32, layers: []string{"linear_attention", "full_attention", "linear_attention", "full_attention"},
			hq: 2, hkv: 1, hd: 24, partial: 0.25, hk: 2, hv: 2, dk: 12, dv: 8, conv: 5, experts: 5, topk: 3, ie: 8, is: 12},
	}
	for i, s := range shapes {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			dir, w := randomCheckpoint(t, s, uint64(i))
			m, err := Load(dir, cpu.New(0))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			r := rand.New(rand.NewPCG(uint64(i), 5))
			ids := make([]int32, 150)
			for j := range ids {
				ids[j] = int32(r.IntN(s.vocab))
			}
			want := naiveForward(s, w, ids)
			scale := 0.0
			for _, v := range want {
				scale = max(scale, math.Abs(v))
			}
			for _, feeds := range [][]int{{150}, {10, 1, 1, 1, 137}, {7, 64, 13, 66}} {
				got, _ := feed(t, m, ids, feeds)
				d := 0.0
				for j := range want {
					d = max(d, math.Abs(float64(got[j])-want[j]))
				}
				t.Logf("feeds %v: max abs diff %.3g (logits up to %.3g)", feeds, d, scale)
				if d > 1e-4*max(scale, 1) {
					t.Errorf("feeds %v: max abs diff %.3g from the float64 reference", feeds, d)
				}
			}
		})
	}
}
