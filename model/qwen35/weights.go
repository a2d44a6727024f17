package qwen35

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/safetensors"
)

// Attention holds one gated full-attention layer's weights (spec §3).
type Attention struct {
	// QProj is [Hq·2d, D]: for each head, d query rows then d gate rows.
	QProj        *compute.Matrix
	KProj, VProj *compute.Matrix // [Hkv·d, D]
	OProj        *compute.Matrix // [D, Hq·d]
	// QNorm and KNorm are the per-head norms' 1+w, [d].
	QNorm, KNorm []float32
}

// DeltaNet holds one Gated DeltaNet layer's weights (spec §4).
type DeltaNet struct {
	InQKV    *compute.Matrix // [2Hk·dk + Hv·dv, D]
	InZ      *compute.Matrix // [Hv·dv, D]
	InB, InA *compute.Matrix // [Hv, D]
	// Conv is the depthwise convolution, stored tap-major [K, ConvDim]
	// (transposed from the checkpoint's [ConvDim, 1, K]): row K-1
	// multiplies the newest input.
	Conv []float32
	// NegA is -exp(A_log), [Hv], computed in float32 as the reference does.
	NegA   []float32
	DtBias []float32 // [Hv]
	// Norm is the output norm's weight (plain w, neutral 1), [dv].
	Norm    []float32
	OutProj *compute.Matrix // [D, Hv·dv]
}

// MLP is one SwiGLU block: Down·(silu(Gate·x) ⊙ Up·x).
type MLP struct {
	Gate, Up *compute.Matrix // [I, D]
	Down     *compute.Matrix // [D, I]
}

// MoE is the mixture of experts of Qwen3.5-MoE with its gated shared expert.
type MoE struct {
	Router     *compute.Matrix // [E, D]
	Experts    []MLP
	Shared     MLP
	SharedGate *compute.Matrix // [1, D]
}

// Layer is one decoder layer: exactly one of Attn and GDN is set (by Kind),
// and exactly one of MLP and MoE (by the config).
type Layer struct {
	Kind                LayerKind
	InputNorm, PostNorm []float32 // 1+w, [D]
	Attn                *Attention
	GDN                 *DeltaNet
	MLP                 *MLP
	MoE                 *MoE
}

// MTP is Qwen3.5's multi-token-prediction module (mtp.* of the Hub
// checkpoint, as vLLM's Qwen3_5MultiTokenPredictor reads it): the next
// token's embedding and the main model's last hidden state are normed,
// concatenated [embedding | hidden] and projected by FC to D, then run
// through full-attention decoder layers and Norm; the logits come from the
// main model's output head.
type MTP struct {
	FC                              *compute.Matrix // [D, 2D]
	PreFCNormEmbed, PreFCNormHidden []float32       // 1+w, [D]
	Layers                          []Layer         // full-attention layers
	Norm                            []float32       // 1+w, [D]
}

// Weights is a bound checkpoint. Matrices point into the checkpoint's memory
// map; vectors are converted to float32.
type Weights struct {
	Embed  *compute.Matrix // [V, D], rows read by token id
	Output *compute.Matrix // [V, D]; Embed when the embeddings are tied
	Norm   []float32       // final norm, 1+w, [D]
	Layers []Layer
	// MTP is nil when the checkpoint carries no mtp.* tensors (text-only
	// saves do not).
	MTP *MTP
}

// canonicalName maps a tensor name of either naming to save_pretrained's
// text-only naming: the multimodal checkpoint keeps the text model under
// model.language_model., transformers' text-only class under model.
func canonicalName(name string) string {
	if rest, ok := strings.CutPrefix(name, "model.language_model."); ok {
		return "model." + rest
	}
	return name
}

// mtpLayerName matches the MTP layers' tensors, capturing the layer index.
var mtpLayerName = regexp.MustCompile(`^mtp\.layers\.(\d+)\.`)

// binder looks tensors up by canonical name and records every problem.
type binder struct {
	cfg    *Config
	ck     *safetensors.Checkpoint
	byName map[string]string // canonical -> stored name
	used   map[string]bool   // canonical names consumed
	errs   []error
}

// Bind maps a checkpoint's tensors onto the model's weights, checking
// names, shapes, dtypes and that every value is finite. It reports every
// missing, unexpected, mis-shaped or non-finite tensor at once. Matrices
// may be stored as F32, BF16 or F16.
//
// The vision tower of a multimodal checkpoint (model.visual.*) is not part
// of the text model and is skipped. The MTP module is bound when the
// checkpoint has mtp.* tensors (then all of them must be there, for
// mtp_num_hidden_layers layers, or as many as are stored when the config
// does not say); a checkpoint without any has W.MTP nil. With tied
// embeddings a stored lm_head.weight must equal the embedding.
func Bind(cfg *Config, ck *safetensors.Checkpoint) (*Weights, error) {
	b := &binder{cfg: cfg, ck: ck, byName: map[string]string{}, used: map[string]bool{}}
	mtpLayers := 0
	hasMTP := false
	for _, name := range ck.Names() {
		if cfg.Multimodal && strings.HasPrefix(name, "model.visual.") {
			continue
		}
		c := canonicalName(name)
		if prev, dup := b.byName[c]; dup {
			b.errf("tensors %q and %q are the same weight %q", prev, name, c)
			continue
		}
		b.byName[c] = name
		if strings.HasPrefix(c, "mtp.") {
			hasMTP = true
			if m := mtpLayerName.FindStringSubmatch(c); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil && n < maxLayers {
					mtpLayers = max(mtpLayers, n+1)
				}
			}
		}
	}
	D := cfg.Hidden
	w := &Weights{
		Embed: b.matrix("model.embed_tokens.weight", cfg.VocabSize, D),
		Norm:  b.norm("model.norm.weight", D),
	}
	if cfg.TieEmbeddings {
		w.Output = w.Embed
		if b.has("lm_head.weight") {
			head := b.matrix("lm_head.weight", cfg.VocabSize, D)
			if head != nil && w.Embed != nil && (head.DType != w.Embed.DType || !bytes.Equal(head.Data, w.Embed.Data)) {
				b.errf("tensor %q differs from the embedding but tie_word_embeddings is true", b.byName["lm_head.weight"])
			}
		}
	} else {
		w.Output = b.matrix("lm_head.weight", cfg.VocabSize, D)
	}
	for i, k := range cfg.Layers {
		w.Layers = append(w.Layers, b.layer(fmt.Sprintf("model.layers.%d.", i), k))
	}
	if hasMTP {
		n := cfg.MTPLayers
		if n == 0 {
			n = mtpLayers
		}
		m := &MTP{
			FC:              b.matrix("mtp.fc.weight", D, 2*D),
			PreFCNormEmbed:  b.norm("mtp.pre_fc_norm_embedding.weight", D),
			PreFCNormHidden: b.norm("mtp.pre_fc_norm_hidden.weight", D),
			Norm:            b.norm("mtp.norm.weight", D),
		}
		for i := range n {
			m.Layers = append(m.Layers, b.layer(fmt.Sprintf("mtp.layers.%d.", i), Full))
		}
		w.MTP = m
	}
	var unexpected []string
	for c, stored := range b.byName {
		if !b.used[c] {
			unexpected = append(unexpected, stored)
		}
	}
	sort.Strings(unexpected)
	for _, n := range unexpected {
		b.errf("unexpected tensor %q", n)
	}
	if len(b.errs) > 0 {
		return nil, fmt.Errorf("qwen35: binding %s: %d problems:\n%w", strings.Join(ck.Files(), ", "), len(b.errs), errors.Join(b.errs...))
	}
	return w, nil
}

func (b *binder) errf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

func (b *binder) has(name string) bool { _, ok := b.byName[name]; return ok }

func (b *binder) lookup(name string) (safetensors.Tensor, bool) {
	stored, ok := b.byName[name]
	if !ok {
		b.errf("missing tensor %q", name)
		return safetensors.Tensor{}, false
	}
	b.used[name] = true
	return b.ck.Tensor(stored)
}

func (b *binder) layer(p string, kind LayerKind) Layer {
	cfg := b.cfg
	D := cfg.Hidden
	L := Layer{
		Kind:      kind,
		InputNorm: b.norm(p+"input_layernorm.weight", D),
		PostNorm:  b.norm(p+"post_attention_layernorm.weight", D),
	}
	switch kind {
	case Full:
		a := p + "self_attn."
		Hq, Hkv, d := cfg.Heads, cfg.KVHeads, cfg.HeadDim
		L.Attn = &Attention{
			QProj: b.matrix(a+"q_proj.weight", Hq*2*d, D),
			KProj: b.matrix(a+"k_proj.weight", Hkv*d, D),
			VProj: b.matrix(a+"v_proj.weight", Hkv*d, D),
			OProj: b.matrix(a+"o_proj.weight", D, Hq*d),
			QNorm: b.norm(a+"q_norm.weight", d),
			KNorm: b.norm(a+"k_norm.weight", d),
		}
	case Linear:
		g := p + "linear_attn."
		Hv, C := cfg.LinValueHeads, cfg.ConvDim()
		n := &DeltaNet{
			InQKV:   b.matrix(g+"in_proj_qkv.weight", C, D),
			InZ:     b.matrix(g+"in_proj_z.weight", cfg.ValueDim(), D),
			InB:     b.matrix(g+"in_proj_b.weight", Hv, D),
			InA:     b.matrix(g+"in_proj_a.weight", Hv, D),
			Conv:    b.conv(g+"conv1d.weight", C, cfg.ConvKernel),
			DtBias:  b.vector(g+"dt_bias", Hv),
			Norm:    b.vector(g+"norm.weight", cfg.LinValueDim),
			OutProj: b.matrix(g+"out_proj.weight", D, cfg.ValueDim()),
		}
		if aLog := b.vector(g+"A_log", Hv); aLog != nil {
			n.NegA = make([]float32, Hv)
			for i, v := range aLog {
				n.NegA[i] = -float32(math.Exp(float64(v)))
			}
		}
		L.GDN = n
	}
	f := p + "mlp."
	if !cfg.MoE {
		L.MLP = b.mlp(f, cfg.Intermediate)
		return L
	}
	E, I := cfg.Experts, cfg.MoEInter
	m := &MoE{
		Router:     b.matrix(f+"gate.weight", E, D),
		Shared:     *b.mlp(f+"shared_expert.", cfg.SharedInter),
		SharedGate: b.matrix(f+"shared_expert_gate.weight", 1, D),
	}
	m.Experts = b.experts(f+"experts.", E, I, D)
	L.MoE = m
	return L
}

func (b *binder) mlp(p string, I int) *MLP {
	D := b.cfg.Hidden
	return &MLP{
		Gate: b.matrix(p+"gate_proj.weight", I, D),
		Up:   b.matrix(p+"up_proj.weight", I, D),
		Down: b.matrix(p+"down_proj.weight", D, I),
	}
}

// experts binds routed experts stored one triple per expert
// (experts.N.{gate,up,down}_proj.weight, as save_pretrained writes them) or
// fused as experts.gate_up_proj [E, 2I, D] = concat(gate, up) and
// experts.down_proj [E, D, I].
func (b *binder) experts(p string, E, I, D int) []MLP {
	if b.has(p + "gate_up_proj") {
		gu := b.stacked(p+"gate_up_proj", E, 2*I, D)
		dn := b.stacked(p+"down_proj", E, D, I)
		if gu == nil || dn == nil {
			return nil
		}
		ex := make([]MLP, E)
		for e := range E {
			ex[e] = MLP{Gate: rowBlock(gu[e], 0, I), Up: rowBlock(gu[e], I, I), Down: dn[e]}
		}
		return ex
	}
	ex := make([]MLP, E)
	for e := range E {
		ex[e] = *b.mlp(fmt.Sprintf("%s%d.", p, e), I)
	}
	return ex
}

// stacked splits an [E, rows, cols] tensor into per-expert matrices.
func (b *binder) stacked(name string, E, rows, cols int) []*compute.Matrix {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	dt, ok := plainDType(t.DType)
	if !ok || len(t.Shape) != 3 || t.Shape[0] != E || t.Shape[1] != rows || t.Shape[2] != cols {
		b.errf("tensor %q: %s %v, want an F32/BF16/F16 [%d %d %d]", b.byName[name], t.DType, t.Shape, E, rows, cols)
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

// matrix binds a [rows, cols] weight stored as F32, BF16 or F16.
func (b *binder) matrix(name string, rows, cols int) *compute.Matrix {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	stored := b.byName[name]
	dt, ok := plainDType(t.DType)
	if !ok {
		b.errf("tensor %q: dtype %s is not a supported weight format (want F32, BF16 or F16)", stored, t.DType)
		return nil
	}
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		b.errf("tensor %q: shape %v, want [%d %d]", stored, t.Shape, rows, cols)
		return nil
	}
	if !b.finite(name, t) {
		return nil
	}
	return &compute.Matrix{DType: dt, Rows: rows, Cols: cols, Data: t.Data}
}

// vector binds a float tensor of n elements (any shape with n elements),
// converted to float32.
func (b *binder) vector(name string, n int) []float32 {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	stored := b.byName[name]
	if t.NumElements() != n {
		b.errf("tensor %q: shape %v has %d elements, want %d", stored, t.Shape, t.NumElements(), n)
		return nil
	}
	v, err := t.Float32s()
	if err != nil {
		b.errf("tensor %q: %v", stored, err)
		return nil
	}
	for i, x := range v {
		if x-x != 0 { // NaN or ±Inf
			b.errf("tensor %q: element %d is %v", stored, i, x)
			return nil
		}
	}
	return v
}

// norm binds the weight of a zero-centred RMSNorm and returns 1+w, the
// factor the normalised values are multiplied by (in float32, as the
// reference computes 1.0 + weight.float()).
func (b *binder) norm(name string, n int) []float32 {
	v := b.vector(name, n)
	for i := range v {
		v[i] = 1 + v[i]
	}
	return v
}

// conv binds the depthwise convolution weight, stored [C, 1, K] (or
// [C, K]), and returns it tap-major, [K, C].
func (b *binder) conv(name string, C, K int) []float32 {
	t, ok := b.ck.Tensor(b.byName[name])
	if b.has(name) && ok && !(len(t.Shape) == 3 && t.Shape[0] == C && t.Shape[1] == 1 && t.Shape[2] == K) &&
		!(len(t.Shape) == 2 && t.Shape[0] == C && t.Shape[1] == K) {
		b.used[name] = true
		b.errf("tensor %q: shape %v, want [%d 1 %d]", b.byName[name], t.Shape, C, K)
		return nil
	}
	v := b.vector(name, C*K)
	if v == nil {
		return nil
	}
	w := make([]float32, K*C)
	for c := range C {
		for j := range K {
			w[j*C+c] = v[c*K+j]
		}
	}
	return w
}

// finite reports whether every element of a float tensor is finite,
// recording an error naming the first that is not.
func (b *binder) finite(name string, t safetensors.Tensor) bool {
	if i := nonFinite(t.DType, t.Data); i >= 0 {
		b.errf("tensor %q: element %d is not finite (NaN or Inf)", b.byName[name], i)
		return false
	}
	return true
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
		i := 0
		// Four elements at a time: an exponent e (bits 7-14 of its lane) is
		// all ones exactly when e + 0x80 carries into the lane's bit 15.
		for ; i+8 <= len(data); i += 8 {
			v := le.Uint64(data[i:])
			if (v&0x7F80_7F80_7F80_7F80+0x0080_0080_0080_0080)&0x8000_8000_8000_8000 == 0 {
				continue
			}
			for k := range 4 {
				if uint16(v>>(16*k))&0x7F80 == 0x7F80 {
					return i/2 + k
				}
			}
		}
		for ; i+2 <= len(data); i += 2 {
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

// rowBlock returns rows [lo, lo+n) of an unquantized m, sharing its memory.
func rowBlock(m *compute.Matrix, lo, n int) *compute.Matrix {
	rowBytes := len(m.Data) / m.Rows
	return &compute.Matrix{DType: m.DType, Rows: n, Cols: m.Cols, Data: m.Data[lo*rowBytes : (lo+n)*rowBytes]}
}
