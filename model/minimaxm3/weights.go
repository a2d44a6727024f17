package minimaxm3

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/safetensors"
)

// GLU is a SwiGLU-OAI feed-forward: Down·act(Gate·x, Up·x) (spec §5).
type GLU struct {
	Gate, Up *compute.Matrix // [I, D]
	Down     *compute.Matrix // [D, I]
}

// Indexer is a sparse layer's lightning indexer (spec §4).
type Indexer struct {
	Q            *compute.Matrix // [Hi·di, D]
	K            *compute.Matrix // [di, D]
	QNorm, KNorm []float32       // [di], stored w (the forward multiplies by 1+w)
}

// Attention is one layer's attention weights (spec §3, §6).
type Attention struct {
	Q            *compute.Matrix // [Hq·d, D]
	K, V         *compute.Matrix // [Hkv·d, D]
	O            *compute.Matrix // [D, Hq·d]
	QNorm, KNorm []float32       // [d], stored w
	Indexer      *Indexer        // sparse layers only
}

// MoE is a sparse layer's FFN: router, score bias, experts and the shared
// expert.
type MoE struct {
	Router  *compute.Matrix // [E, D]
	Bias    []float32       // e_score_correction_bias [E]
	Experts []GLU
	Shared  GLU
}

// LayerWeights holds one decoder layer's weights.
type LayerWeights struct {
	InputNorm, PostNorm []float32 // [D], stored w
	Attn                Attention
	Dense               *GLU // dense layers
	MoE                 *MoE // MoE layers
}

// Weights is a bound checkpoint. Matrices point into the checkpoint's
// memory map; vectors are converted to float32 as stored (norm weights
// are w, not 1+w).
type Weights struct {
	Embed  *compute.Matrix // [V, D]
	Output *compute.Matrix // [V, D]; Embed when tied
	Norm   []float32       // [D]
	Layers []LayerWeights
}

// Naming says which of the two checkpoint namings a checkpoint uses.
type Naming int

const (
	// SavePretrained is transformers' naming (model.*, mlp.gate.*,
	// fused gate_up_proj, self_attn.indexer.*).
	SavePretrained Naming = iota
	// Hub is the released checkpoint's (the text model nested under
	// language_model.*, the MoE under block_sparse_moe with the score bias
	// beside the gate, per-expert w1/w3/w2, separate gate and up
	// projections, self_attn.index_*).
	Hub
)

func (n Naming) String() string {
	if n == Hub {
		return "hub"
	}
	return "save_pretrained"
}

// binder looks tensors up by name and records every problem.
type binder struct {
	cfg    *Config
	ck     *safetensors.Checkpoint
	naming Naming
	pre    string // the text model's prefix ("model." or "language_model.model.")
	head   string // lm_head's name
	used   map[string]bool
	errs   []error
}

// DetectNaming says which naming ck uses: the Hub's when a tensor is
// nested under language_model. or uses the Hub's module names
// (block_sparse_moe, self_attn.index_*). Either naming's text model may be
// nested under a multimodal wrapper's prefix (Bind finds it).
func DetectNaming(ck *safetensors.Checkpoint) Naming {
	for _, n := range ck.Names() {
		if strings.HasPrefix(n, "language_model.") || strings.Contains(n, ".block_sparse_moe.") || strings.Contains(n, ".self_attn.index_") {
			return Hub
		}
	}
	return SavePretrained
}

// Bind maps a checkpoint's tensors onto the model's weights, in either
// naming (DetectNaming). It checks names, shapes, dtypes (F32, BF16, F16)
// and that every value is finite, and reports every missing, unexpected,
// mis-shaped or non-finite tensor at once. The Hub checkpoint's vision
// tower, projector and multi-token-prediction tensors are not read.
func Bind(cfg *Config, ck *safetensors.Checkpoint) (*Weights, error) {
	b := &binder{cfg: cfg, ck: ck, naming: DetectNaming(ck), pre: "model.", head: "lm_head.weight", used: map[string]bool{}}
	// The text model may sit under the multimodal wrapper's prefix: the
	// original checkpoint's language_model.model.*, or transformers'
	// model.language_model.* for the conditional-generation class.
	for _, pre := range []string{"language_model.model.", "model.language_model."} {
		if b.has(pre + "embed_tokens.weight") {
			b.pre = pre
		}
	}
	if b.has("language_model.lm_head.weight") {
		b.head = "language_model.lm_head.weight"
	}
	D, V := cfg.Hidden, cfg.VocabSize
	w := &Weights{
		Embed: b.matrix(b.pre+"embed_tokens.weight", V, D),
		Norm:  b.vector(b.pre+"norm.weight", D),
	}
	if cfg.TieEmbeddings {
		w.Output = w.Embed
	} else {
		w.Output = b.matrix(b.head, V, D)
	}
	w.Layers = make([]LayerWeights, cfg.NumLayers())
	for l := range w.Layers {
		w.Layers[l] = b.layer(l)
	}
	var unexpected []string
	for _, n := range ck.Names() {
		if !b.used[n] && !b.ignored(n) {
			unexpected = append(unexpected, n)
		}
	}
	sort.Strings(unexpected)
	for _, n := range unexpected {
		b.errf("unexpected tensor %q", n)
	}
	if len(b.errs) > 0 {
		return nil, fmt.Errorf("minimaxm3: binding %s (%v naming): %d problems:\n%w", strings.Join(ck.Files(), ", "), b.naming, len(b.errs), errors.Join(b.errs...))
	}
	return w, nil
}

// ignored reports whether a tensor the text model does not read is one
// the reference does not read either: the Hub checkpoint's other towers
// and its multi-token-prediction layers.
func (b *binder) ignored(name string) bool {
	if strings.HasPrefix(name, "mtp.") || strings.Contains(name, ".mtp.") || strings.HasPrefix(name, b.pre+"mtp") {
		return true // transformers drops (^|\.)mtp\. keys on load
	}
	// The multimodal checkpoints' vision tower and projector.
	return (b.naming == Hub || b.pre != "model.") && !strings.HasPrefix(name, b.pre) && name != b.head
}

func (b *binder) errf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

func (b *binder) has(name string) bool {
	_, ok := b.ck.Tensor(name)
	return ok
}

// lookup finds a tensor, recording it as used, or records it as missing.
func (b *binder) lookup(name string) (safetensors.Tensor, bool) {
	t, ok := b.ck.Tensor(name)
	if !ok {
		b.errf("missing tensor %q", name)
		return safetensors.Tensor{}, false
	}
	b.used[name] = true
	return t, true
}

func (b *binder) layer(l int) LayerWeights {
	c := b.cfg
	D, Hq, Hkv, d := c.Hidden, c.Heads, c.KVHeads, c.HeadDim
	p := fmt.Sprintf("%slayers.%d.", b.pre, l)
	a := p + "self_attn."
	L := LayerWeights{
		InputNorm: b.vector(p+"input_layernorm.weight", D),
		PostNorm:  b.vector(p+"post_attention_layernorm.weight", D),
		Attn: Attention{
			Q:     b.matrix(a+"q_proj.weight", Hq*d, D),
			K:     b.matrix(a+"k_proj.weight", Hkv*d, D),
			V:     b.matrix(a+"v_proj.weight", Hkv*d, D),
			O:     b.matrix(a+"o_proj.weight", D, Hq*d),
			QNorm: b.vector(a+"q_norm.weight", d),
			KNorm: b.vector(a+"k_norm.weight", d),
		},
	}
	if c.Sparse[l] {
		x := a + "indexer."
		if b.naming == Hub {
			x = a + "index_"
		}
		L.Attn.Indexer = &Indexer{
			Q:     b.matrix(x+"q_proj.weight", c.IndexHeads*c.IndexDim, D),
			K:     b.matrix(x+"k_proj.weight", c.IndexDim, D),
			QNorm: b.vector(x+"q_norm.weight", c.IndexDim),
			KNorm: b.vector(x+"k_norm.weight", c.IndexDim),
		}
	}
	if !c.MoE[l] {
		g := b.glu(p+"mlp.", c.DenseInter)
		L.Dense = &g
		return L
	}
	E, Ie := c.Experts, c.MoEInter
	m := &MoE{}
	if b.naming == Hub {
		q := p + "block_sparse_moe."
		m.Router = b.matrix(q+"gate.weight", E, D)
		bias := q + "e_score_correction_bias"
		if !b.has(bias) && b.has(q+"gate.e_score_correction_bias") {
			bias = q + "gate.e_score_correction_bias"
		}
		m.Bias = b.vector(bias, E)
		if b.has(q + "experts.gate_up_proj") {
			m.Experts = b.stackedExperts(q+"experts.", E, Ie)
		} else {
			m.Experts = make([]GLU, E)
			for e := range E {
				x := fmt.Sprintf("%sexperts.%d.", q, e)
				m.Experts[e] = GLU{Gate: b.matrix(x+"w1.weight", Ie, D), Up: b.matrix(x+"w3.weight", Ie, D), Down: b.matrix(x+"w2.weight", D, Ie)}
			}
		}
		m.Shared = b.glu(q+"shared_experts.", c.SharedInter)
	} else {
		q := p + "mlp."
		m.Router = b.matrix(q+"gate.weight", E, D)
		bias := q + "gate.e_score_correction_bias"
		if !b.has(bias) && b.has(q+"e_score_correction_bias") {
			bias = q + "e_score_correction_bias" // transformers versions that keep the bias on the MoE block
		}
		m.Bias = b.vector(bias, E)
		m.Experts = b.stackedExperts(q+"experts.", E, Ie)
		m.Shared = b.glu(q+"shared_experts.", c.SharedInter)
	}
	L.MoE = m
	return L
}

// glu binds a dense SwiGLU-OAI FFN of width I under prefix: the fused
// gate_up_proj [2I, D] (gate rows first) or, where a checkpoint has them,
// separate gate_proj and up_proj.
func (b *binder) glu(prefix string, I int) GLU {
	D := b.cfg.Hidden
	g := GLU{Down: b.matrix(prefix+"down_proj.weight", D, I)}
	if !b.has(prefix+"gate_up_proj.weight") && b.has(prefix+"gate_proj.weight") {
		g.Gate = b.matrix(prefix+"gate_proj.weight", I, D)
		g.Up = b.matrix(prefix+"up_proj.weight", I, D)
		return g
	}
	gu := b.matrix(prefix+"gate_up_proj.weight", 2*I, D)
	if gu != nil {
		g.Gate, g.Up = rows(gu, 0, I), rows(gu, I, I)
	}
	return g
}

// stackedExperts binds experts stored as gate_up_proj [E, 2Ie, D] and
// down_proj [E, D, Ie].
func (b *binder) stackedExperts(prefix string, E, Ie int) []GLU {
	D := b.cfg.Hidden
	gu := b.stacked(prefix+"gate_up_proj", E, 2*Ie, D)
	dn := b.stacked(prefix+"down_proj", E, D, Ie)
	if gu == nil || dn == nil {
		return nil
	}
	out := make([]GLU, E)
	for e := range E {
		out[e] = GLU{Gate: rows(gu[e], 0, Ie), Up: rows(gu[e], Ie, Ie), Down: dn[e]}
	}
	return out
}

// rows returns rows [lo, lo+n) of an unquantized m, sharing its memory.
func rows(m *compute.Matrix, lo, n int) *compute.Matrix {
	rb := len(m.Data) / m.Rows
	return &compute.Matrix{DType: m.DType, Rows: n, Cols: m.Cols, Data: m.Data[lo*rb : (lo+n)*rb]}
}

// matrix binds a [rows, cols] weight stored as F32, BF16 or F16.
func (b *binder) matrix(name string, r, c int) *compute.Matrix {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	dt, ok := plainDType(t.DType)
	if !ok {
		b.errf("tensor %q: dtype %s is not a supported weight format (want F32, BF16 or F16)", name, t.DType)
		return nil
	}
	if len(t.Shape) != 2 || t.Shape[0] != r || t.Shape[1] != c {
		b.errf("tensor %q: shape %v, want [%d %d]", name, t.Shape, r, c)
		return nil
	}
	if !b.finite(name, t) {
		return nil
	}
	return &compute.Matrix{DType: dt, Rows: r, Cols: c, Data: t.Data}
}

// stacked splits an [E, rows, cols] tensor into per-expert matrices.
func (b *binder) stacked(name string, E, r, c int) []*compute.Matrix {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	dt, ok := plainDType(t.DType)
	if !ok || len(t.Shape) != 3 || t.Shape[0] != E || t.Shape[1] != r || t.Shape[2] != c {
		b.errf("tensor %q: %s %v, want an F32/BF16/F16 [%d %d %d]", name, t.DType, t.Shape, E, r, c)
		return nil
	}
	if !b.finite(name, t) {
		return nil
	}
	per := len(t.Data) / E
	out := make([]*compute.Matrix, E)
	for e := range E {
		out[e] = &compute.Matrix{DType: dt, Rows: r, Cols: c, Data: t.Data[e*per : (e+1)*per]}
	}
	return out
}

// vector binds a float tensor of n elements, converted to float32.
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
		if x-x != 0 {
			b.errf("tensor %q: element %d is %v", name, i, x)
			return nil
		}
	}
	return v
}

func (b *binder) finite(name string, t safetensors.Tensor) bool {
	if i := nonFinite(t.DType, t.Data); i >= 0 {
		b.errf("tensor %q: element %d is not finite (NaN or Inf)", name, i)
		return false
	}
	return true
}

// nonFinite returns the index of the first NaN or ±Inf element of F32,
// BF16 or F16 data, or -1.
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
