package hy4

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model/dsa"
	"github.com/strata-inference/strata/safetensors"
)

// HC is one iHC mixer (spec §2): a sublayer's Fn [2C, C·D], Base [2C],
// Scale [2], or the head's Fn [C, C·D], Base [C], Scale [1].
type HC struct {
	Fn          *compute.Matrix
	Base, Scale []float32
}

// Attention is one layer's MLA weights (dsa's, the indexer on full layers
// only) with HY4's output gate and sinks.
type Attention struct {
	dsa.Attention
	Gate  *compute.Matrix // linear_gate [H·dv, D]
	Sinks []float32       // learnable_sink_param [H]
}

// Layer is one decoder block: Dense or MoE is set.
type Layer struct {
	AttnHC, FFNHC       HC
	InputNorm, PostNorm []float32
	Attn                Attention
	Dense               *dsa.Expert
	MoE                 *dsa.MoE
}

// Weights is a bound checkpoint. Matrices point into the checkpoint's
// memory map.
type Weights struct {
	Embed, Output *compute.Matrix // [V, D]
	Norm          []float32
	Head          HC
	Layers        []Layer
}

// binder looks tensors up by name and records every problem.
type binder struct {
	cfg  *Config
	ck   *safetensors.Checkpoint
	used map[string]bool
	errs []error
}

// Bind maps a checkpoint's tensors onto the model's weights (spec §5):
// the names save_pretrained writes (the checkpoint spelling:
// hc_pre.hc_attn_layer.hc_fn, linear_gate, learnable_sink_param, routed
// experts stacked as experts.gate_up_proj [E, 2Ie, D] and
// experts.down_proj [E, D, Ie]), or the names transformers gives them in
// memory (attn_hc.fn, ffn_hc.fn, hc_head.hc_fn, gate_proj, sinks), and
// routed experts one triple per expert. Matrices are f32, bf16 or f16.
// Every missing, unexpected, mis-shaped or non-finite tensor is reported
// in one error.
func Bind(cfg *Config, ck *safetensors.Checkpoint) (*Weights, error) {
	b := &binder{cfg: cfg, ck: ck, used: map[string]bool{}}
	D, V, C := cfg.Hidden, cfg.VocabSize, cfg.HCMult
	w := &Weights{
		Embed: b.matrix(V, D, "model.embed_tokens.weight"),
		Norm:  b.vector(D, "model.norm.weight"),
		Head: HC{
			Fn:    b.matrix(C, C*D, "model.hc_pre.hc_head.hc_head_fn", "model.hc_head.hc_fn"),
			Base:  b.vector(C, "model.hc_pre.hc_head.hc_head_base", "model.hc_head.hc_base"),
			Scale: b.vector(1, "model.hc_pre.hc_head.hc_head_scale", "model.hc_head.hc_scale"),
		},
	}
	if cfg.TieEmbeddings {
		w.Output = w.Embed
	} else {
		w.Output = b.matrix(V, D, "lm_head.weight")
	}
	for l := range cfg.NumLayers {
		w.Layers = append(w.Layers, b.layer(l))
	}
	var unexpected []string
	for _, n := range ck.Names() {
		if !b.used[n] {
			unexpected = append(unexpected, n)
		}
	}
	sort.Strings(unexpected)
	for _, n := range unexpected {
		b.errf("unexpected tensor %q", n)
	}
	if len(b.errs) > 0 {
		return nil, fmt.Errorf("hy4: binding %s: %d problems:\n%w", strings.Join(ck.Files(), ", "), len(b.errs), errors.Join(b.errs...))
	}
	return w, nil
}

func (b *binder) errf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

func (b *binder) has(name string) bool { _, ok := b.ck.Tensor(name); return ok }

// lookup finds the first of names (spellings of one tensor) the checkpoint
// holds; it is an error when it holds none, or more than one.
func (b *binder) lookup(names ...string) (string, safetensors.Tensor, bool) {
	var found []string
	for _, n := range names {
		if b.has(n) {
			found = append(found, n)
			b.used[n] = true
		}
	}
	switch len(found) {
	case 0:
		if len(names) == 1 {
			b.errf("missing tensor %q", names[0])
		} else {
			b.errf("missing tensor %q (or %s)", names[0], strings.Join(quoted(names[1:]), ", "))
		}
		return names[0], safetensors.Tensor{}, false
	case 1:
	default:
		b.errf("tensor %s: given twice, as %s", names[0], strings.Join(quoted(found), " and "))
		return found[0], safetensors.Tensor{}, false
	}
	t, _ := b.ck.Tensor(found[0])
	return found[0], t, true
}

func quoted(ns []string) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

func (b *binder) layer(l int) Layer {
	cfg := b.cfg
	D, H, q, c, C := cfg.Hidden, cfg.Heads, cfg.QLoraRank, cfg.KVLoraRank, cfg.HCMult
	n, r, dv := cfg.NopeDim, cfg.RopeDim, cfg.VDim
	p := fmt.Sprintf("model.layers.%d.", l)
	a := p + "self_attn."
	hc := func(save, mem string) HC {
		return HC{
			Fn:    b.matrix(2*C, C*D, p+"hc_pre."+save+".hc_fn", p+mem+".fn"),
			Base:  b.vector(2*C, p+"hc_pre."+save+".hc_base", p+mem+".base"),
			Scale: b.vector(2, p+"hc_pre."+save+".hc_scale", p+mem+".scale"),
		}
	}
	L := Layer{
		AttnHC:    hc("hc_attn_layer", "attn_hc"),
		FFNHC:     hc("hc_mlp_layer", "ffn_hc"),
		InputNorm: b.vector(D, p+"input_layernorm.weight"),
		PostNorm:  b.vector(D, p+"post_attention_layernorm.weight"),
		Attn: Attention{
			Attention: dsa.Attention{
				QA:      b.matrix(q, D, a+"q_a_proj.weight"),
				QANorm:  b.vector(q, a+"q_a_layernorm.weight"),
				QB:      b.matrix(H*(n+r), q, a+"q_b_proj.weight"),
				KVA:     b.matrix(c+r, D, a+"kv_a_proj_with_mqa.weight"),
				KVANorm: b.vector(c, a+"kv_a_layernorm.weight"),
				KVB:     b.matrix(H*(n+dv), c, a+"kv_b_proj.weight"),
				O:       b.matrix(D, H*dv, a+"o_proj.weight"),
			},
			Gate:  b.matrix(H*dv, D, a+"linear_gate.weight", a+"gate_proj.weight"),
			Sinks: b.vector(H, a+"learnable_sink_param", a+"sinks"),
		},
	}
	x := a + "indexer."
	if cfg.FullIndexer[l] {
		Hi, di := cfg.IndexHeads, cfg.IndexDim
		L.Attn.Indexer = &dsa.Indexer{
			WqB:         b.matrix(Hi*di, q, x+"wq_b.weight"),
			Wk:          b.matrix(di, D, x+"wk.weight"),
			KNorm:       b.vector(di, x+"k_norm.weight"),
			KBias:       b.vector(di, x+"k_norm.bias"),
			WeightsProj: b.matrix(Hi, D, x+"weights_proj.weight"),
		}
	} else {
		for _, n := range b.ck.Names() {
			if strings.HasPrefix(n, x) {
				b.used[n] = true
				b.errf("tensor %q: layer %d is a shared-indexer layer (indexer_types) and has no indexer of its own", n, l)
			}
		}
	}
	m := p + "mlp."
	if cfg.Dense[l] {
		L.Dense = b.expert(m, cfg.Intermediate)
		return L
	}
	E, I := cfg.Experts, cfg.MoEInter
	L.MoE = &dsa.MoE{
		Router:  b.matrix(E, D, m+"gate.weight"),
		Bias:    b.vector(E, m+"gate.e_score_correction_bias"),
		Experts: b.experts(m, E, I),
	}
	if s := b.expert(m+"shared_experts.", I*cfg.SharedExperts); s != nil {
		L.MoE.Shared = *s
	}
	return L
}

// expert binds a SwiGLU whose gate is linear_gate (checkpoint) or
// gate_proj (in memory).
func (b *binder) expert(p string, I int) *dsa.Expert {
	D := b.cfg.Hidden
	return &dsa.Expert{
		Gate: b.matrix(I, D, p+"linear_gate.weight", p+"gate_proj.weight"),
		Up:   b.matrix(I, D, p+"up_proj.weight"),
		Down: b.matrix(D, I, p+"down_proj.weight"),
	}
}

// experts binds the routed experts, stacked or one triple per expert.
func (b *binder) experts(m string, E, I int) []dsa.Expert {
	D := b.cfg.Hidden
	ex := make([]dsa.Expert, E)
	if b.has(m+"experts.gate_up_proj") || !b.has(m+"experts.0.up_proj.weight") {
		gu := b.stacked(m+"experts.gate_up_proj", E, 2*I, D)
		dn := b.stacked(m+"experts.down_proj", E, D, I)
		if gu == nil || dn == nil {
			return nil
		}
		for e := range E {
			ex[e] = dsa.Expert{Gate: rowBlock(gu[e], 0, I), Up: rowBlock(gu[e], I, I), Down: dn[e]}
		}
		return ex
	}
	for e := range E {
		ex[e] = *b.expert(fmt.Sprintf("%sexperts.%d.", m, e), I)
	}
	return ex
}

func plainDType(d safetensors.DType) (compute.DType, bool) {
	switch d {
	case safetensors.F32:
		return compute.F32, true
	case safetensors.BF16:
		return compute.BF16, true
	case safetensors.F16:
		return compute.F16, true
	}
	return 0, false
}

// stacked splits an [E, rows, cols] tensor into per-expert matrices.
func (b *binder) stacked(name string, E, rows, cols int) []*compute.Matrix {
	name, t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	dt, ok := plainDType(t.DType)
	if !ok || len(t.Shape) != 3 || t.Shape[0] != E || t.Shape[1] != rows || t.Shape[2] != cols {
		b.errf("tensor %q: %s %v, want an f32/bf16/f16 [%d %d %d]", name, t.DType, t.Shape, E, rows, cols)
		return nil
	}
	if !b.finite(name, t) {
		return nil
	}
	per := len(t.Data) / E
	out := make([]*compute.Matrix, E)
	for e := range E {
		out[e] = &compute.Matrix{DType: dt, Rows: rows, Cols: cols, Data: t.Data[e*per : (e+1)*per]}
	}
	return out
}

// matrix binds a [rows, cols] weight stored as f32, bf16 or f16, under
// the first of its spellings the checkpoint holds.
func (b *binder) matrix(rows, cols int, names ...string) *compute.Matrix {
	name, t, ok := b.lookup(names...)
	if !ok {
		return nil
	}
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		b.errf("tensor %q: shape %v, want [%d %d]", name, t.Shape, rows, cols)
		return nil
	}
	dt, ok := plainDType(t.DType)
	if !ok {
		b.errf("tensor %q: dtype %s is not a supported weight format (want F32, BF16 or F16)", name, t.DType)
		return nil
	}
	if !b.finite(name, t) {
		return nil
	}
	return &compute.Matrix{DType: dt, Rows: rows, Cols: cols, Data: t.Data}
}

// vector binds a float tensor of n elements (any float dtype, any shape
// with n elements), converted to float32.
func (b *binder) vector(n int, names ...string) []float32 {
	name, t, ok := b.lookup(names...)
	if !ok {
		return nil
	}
	if t.NumElements() != n {
		b.errf("tensor %q: shape %v has %d elements, want %d", name, t.Shape, t.NumElements(), n)
		return nil
	}
	v, err := t.Float32s()
	if err != nil {
		b.errf("tensor %q: %v", name, err)
		return nil
	}
	for i, x := range v {
		if x-x != 0 { // NaN or ±Inf
			b.errf("tensor %q: element %d is %v", name, i, x)
			return nil
		}
	}
	return v
}

// finite reports whether every element of a float tensor is finite,
// recording an error naming the first that is not: an element is
// non-finite exactly when its exponent bits are all ones.
func (b *binder) finite(name string, t safetensors.Tensor) bool {
	le := binary.LittleEndian
	bad := -1
	switch t.DType {
	case safetensors.F32:
		for i := 0; i+4 <= len(t.Data) && bad < 0; i += 4 {
			if le.Uint32(t.Data[i:])&0x7F800000 == 0x7F800000 {
				bad = i / 4
			}
		}
	case safetensors.BF16:
		for i := 0; i+2 <= len(t.Data) && bad < 0; i += 2 {
			if le.Uint16(t.Data[i:])&0x7F80 == 0x7F80 {
				bad = i / 2
			}
		}
	case safetensors.F16:
		for i := 0; i+2 <= len(t.Data) && bad < 0; i += 2 {
			if le.Uint16(t.Data[i:])&0x7C00 == 0x7C00 {
				bad = i / 2
			}
		}
	}
	if bad >= 0 {
		b.errf("tensor %q: element %d is not finite (NaN or Inf)", name, bad)
		return false
	}
	return true
}
