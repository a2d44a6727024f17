package kimilinear

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/safetensors"
)

// KDAWeights holds one KDA layer's token mixer (spec §4, §6).
type KDAWeights struct {
	QProj, KProj, VProj *compute.Matrix // [Hl·dk, D]
	// Conv is the q|k|v depthwise kernels concatenated and tap-major,
	// [K, 3·Hl·dk] (row K-1 multiplies the newest input).
	Conv   []float32
	NegA   []float32       // −exp(A_log) [Hl]
	DtBias []float32       // [Hl·dk]
	FA     *compute.Matrix // f_a_proj [dk, D]
	FB     *compute.Matrix // f_b_proj [Hl·dk, dk]
	BProj  *compute.Matrix // b_proj [Hl, D]
	GA     *compute.Matrix // g_a_proj [dk, D]
	GB     *compute.Matrix // g_b_proj [Hl·dk, dk]
	ONorm  []float32       // o_norm [dk]
	OProj  *compute.Matrix // [D, Hl·dk]
}

// MLAWeights holds one MLA layer's token mixer (spec §3, §6). Q is set for
// a plain q_proj; QA, QANorm and QB for a low-rank query.
type MLAWeights struct {
	Q       *compute.Matrix // q_proj [H(n+r), D]
	QA      *compute.Matrix // q_a_proj [q, D]
	QANorm  []float32       // q_a_layernorm [q]
	QB      *compute.Matrix // q_b_proj [H(n+r), q]
	KVA     *compute.Matrix // kv_a_proj_with_mqa [c+r, D]
	KVANorm []float32       // kv_a_layernorm [c]
	KVB     *compute.Matrix // kv_b_proj [H(n+dv), c]
	O       *compute.Matrix // o_proj [D, H·dv]
}

// Expert is one SwiGLU: Gate and Up [I, D], Down [D, I].
type Expert struct{ Gate, Up, Down *compute.Matrix }

// MoE holds a sparse layer's router and experts (spec §5).
type MoE struct {
	Router  *compute.Matrix // gate.weight [E, D]
	Bias    []float32       // gate.e_score_correction_bias [E]
	Experts []Expert
	Shared  *Expert // width Ie·num_shared_experts
}

// Layer holds one decoder layer: KDA or MLA is set, and Dense or MoE.
type Layer struct {
	InputNorm, PostNorm []float32
	KDA                 *KDAWeights
	MLA                 *MLAWeights
	Dense               *Expert
	MoE                 *MoE
}

// Weights is a bound checkpoint. Matrices point into the checkpoint's
// memory map.
type Weights struct {
	Embed, Output *compute.Matrix // [V, D]
	Norm          []float32
	Layers        []Layer
}

// binder looks tensors up by name and records every problem.
type binder struct {
	cfg  *Config
	ck   *safetensors.Checkpoint
	used map[string]bool
	errs []error
}

// Bind maps a checkpoint's tensors (save_pretrained names, which the
// released checkpoints share; matrices f32, bf16 or f16) onto the model's
// weights. Every missing, unexpected, mis-shaped or non-finite tensor is
// reported in one error.
func Bind(cfg *Config, ck *safetensors.Checkpoint) (*Weights, error) {
	b := &binder{cfg: cfg, ck: ck, used: map[string]bool{}}
	D, V := cfg.Hidden, cfg.VocabSize
	w := &Weights{Embed: b.matrix("model.embed_tokens.weight", V, D), Norm: b.vector("model.norm.weight", D)}
	if cfg.TieEmbeddings {
		w.Output = w.Embed
	} else {
		w.Output = b.matrix("lm_head.weight", V, D)
	}
	for l := range cfg.NumLayers() {
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
		return nil, fmt.Errorf("kimilinear: binding %s: %d problems:\n%w", strings.Join(ck.Files(), ", "), len(b.errs), errors.Join(b.errs...))
	}
	return w, nil
}

func (b *binder) errf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

func (b *binder) lookup(name string) (safetensors.Tensor, bool) {
	t, ok := b.ck.Tensor(name)
	if !ok {
		b.errf("missing tensor %q", name)
		return t, false
	}
	b.used[name] = true
	return t, true
}

func (b *binder) layer(l int) Layer {
	cfg := b.cfg
	D := cfg.Hidden
	p := fmt.Sprintf("model.layers.%d.", l)
	a := p + "self_attn."
	L := Layer{
		InputNorm: b.vector(p+"input_layernorm.weight", D),
		PostNorm:  b.vector(p+"post_attention_layernorm.weight", D),
	}
	if cfg.Layers[l] == KDA {
		Hl, dk, K := cfg.LinHeads, cfg.LinHeadDim, cfg.ConvKernel
		n := Hl * dk
		k := &KDAWeights{
			QProj: b.matrix(a+"q_proj.weight", n, D), KProj: b.matrix(a+"k_proj.weight", n, D), VProj: b.matrix(a+"v_proj.weight", n, D),
			DtBias: b.vector(a+"dt_bias", n),
			FA:     b.matrix(a+"f_a_proj.weight", dk, D), FB: b.matrix(a+"f_b_proj.weight", n, dk),
			BProj: b.matrix(a+"b_proj.weight", Hl, D),
			GA:    b.matrix(a+"g_a_proj.weight", dk, D), GB: b.matrix(a+"g_b_proj.weight", n, dk),
			ONorm: b.vector(a+"o_norm.weight", dk),
			OProj: b.matrix(a+"o_proj.weight", D, n),
		}
		if alog := b.vector(a+"A_log", Hl); alog != nil {
			for _, v := range alog {
				k.NegA = append(k.NegA, -float32(math.Exp(float64(v))))
			}
		}
		// The three depthwise kernels, concatenated q|k|v, tap-major.
		k.Conv = make([]float32, K*3*n)
		for i, name := range []string{"q_conv1d", "k_conv1d", "v_conv1d"} {
			v := b.conv(a+name+".weight", n, K)
			if v == nil {
				k.Conv = nil
				continue
			}
			if k.Conv == nil {
				continue
			}
			for c := range n {
				for j := range K {
					k.Conv[j*3*n+i*n+c] = v[c*K+j]
				}
			}
		}
		if k.QProj != nil && k.KProj != nil && k.VProj != nil && (k.KProj.DType != k.QProj.DType || k.VProj.DType != k.QProj.DType) {
			b.errf("layer %d: q_proj, k_proj and v_proj are stored as %v, %v and %v; they must share one dtype", l, k.QProj.DType, k.KProj.DType, k.VProj.DType)
		}
		L.KDA = k
	} else {
		H, c, nd, r, dv := cfg.Heads, cfg.KVLoraRank, cfg.NopeDim, cfg.RopeDim, cfg.VDim
		m := &MLAWeights{
			KVA:     b.matrix(a+"kv_a_proj_with_mqa.weight", c+r, D),
			KVANorm: b.vector(a+"kv_a_layernorm.weight", c),
			KVB:     b.matrix(a+"kv_b_proj.weight", H*(nd+dv), c),
			O:       b.matrix(a+"o_proj.weight", D, H*dv),
		}
		if q := cfg.QLoraRank; q > 0 {
			m.QA = b.matrix(a+"q_a_proj.weight", q, D)
			m.QANorm = b.vector(a+"q_a_layernorm.weight", q)
			m.QB = b.matrix(a+"q_b_proj.weight", H*(nd+r), q)
		} else {
			m.Q = b.matrix(a+"q_proj.weight", H*(nd+r), D)
		}
		L.MLA = m
	}
	f := p + "block_sparse_moe."
	if cfg.Dense[l] {
		L.Dense = b.expert(f, "gate_proj", "up_proj", "down_proj", cfg.Intermediate)
		return L
	}
	E, I := cfg.Experts, cfg.MoEInter
	moe := &MoE{
		Router: b.matrix(f+"gate.weight", E, D),
		Bias:   b.vector(f+"gate.e_score_correction_bias", E),
	}
	for e := range E {
		moe.Experts = append(moe.Experts, *b.expert(fmt.Sprintf("%sexperts.%d.", f, e), "w1", "w3", "w2", I))
	}
	moe.Shared = b.expert(f+"shared_experts.", "gate_proj", "up_proj", "down_proj", I*cfg.SharedExperts)
	L.MoE = moe
	return L
}

// expert binds a SwiGLU whose gate, up and down matrices are named
// p+gate+".weight" and so on.
func (b *binder) expert(p, gate, up, down string, I int) *Expert {
	D := b.cfg.Hidden
	return &Expert{
		Gate: b.matrix(p+gate+".weight", I, D),
		Up:   b.matrix(p+up+".weight", I, D),
		Down: b.matrix(p+down+".weight", D, I),
	}
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

// matrix binds a [rows, cols] weight stored as f32, bf16 or f16.
func (b *binder) matrix(name string, rows, cols int) *compute.Matrix {
	t, ok := b.lookup(name)
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
	if i := nonFinite(t.DType, t.Data); i >= 0 {
		b.errf("tensor %q: element %d is not finite (NaN or Inf)", name, i)
		return nil
	}
	return &compute.Matrix{DType: dt, Rows: rows, Cols: cols, Data: t.Data}
}

// vector binds a float tensor of n elements (any float dtype, any shape
// with n elements), converted to float32.
func (b *binder) vector(name string, n int) []float32 {
	t, ok := b.lookup(name)
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

// conv binds a depthwise convolution weight stored [C, 1, K] (or [C, K]),
// channel-major as stored.
func (b *binder) conv(name string, C, K int) []float32 {
	if t, ok := b.ck.Tensor(name); ok && !(len(t.Shape) == 3 && t.Shape[0] == C && t.Shape[1] == 1 && t.Shape[2] == K) &&
		!(len(t.Shape) == 2 && t.Shape[0] == C && t.Shape[1] == K) {
		b.used[name] = true
		b.errf("tensor %q: shape %v, want [%d 1 %d]", name, t.Shape, C, K)
		return nil
	}
	return b.vector(name, C*K)
}

// nonFinite returns the index of the first NaN or ±Inf element of F32,
// BF16 or F16 data, or -1: an element is non-finite exactly when its
// exponent bits are all ones.
func nonFinite(dt safetensors.DType, data []byte) int {
	le := binary.LittleEndian
	switch dt {
	case safetensors.F32:
		for i := 0; i+4 <= len(data); i += 4 {
			if le.Uint32(data[i:])&0x7F800000 == 0x7F800000 {
				return i / 4
			}
		}
	case safetensors.BF16:
		for i := 0; i+2 <= len(data); i += 2 {
			if le.Uint16(data[i:])&0x7F80 == 0x7F80 {
				return i / 2
			}
		}
	case safetensors.F16:
		for i := 0; i+2 <= len(data); i += 2 {
			if le.Uint16(data[i:])&0x7C00 == 0x7C00 {
				return i / 2
			}
		}
	}
	return -1
}
