package dsa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/safetensors"
)

// Indexer holds a full layer's lightning indexer (spec §5).
type Indexer struct {
	WqB          *compute.Matrix // [Hi·di, q]
	Wk           *compute.Matrix // [di, D]
	KNorm, KBias []float32       // LayerNorm weight and bias [di]
	WeightsProj  *compute.Matrix // [Hi, D]
}

// Attention holds one layer's MLA weights (spec §4).
type Attention struct {
	QA      *compute.Matrix // q_a_proj [q, D]
	QANorm  []float32       // q_a_layernorm [q]
	QB      *compute.Matrix // q_b_proj [H·(n+r), q]
	KVA     *compute.Matrix // kv_a_proj_with_mqa [c+r, D]
	KVANorm []float32       // kv_a_layernorm [c]
	KVB     *compute.Matrix // kv_b_proj [H·(n+dv), c]
	O       *compute.Matrix // o_proj [D, H·dv]
	Indexer *Indexer        // nil on shared-indexer layers
}

// Expert is one SwiGLU: Gate and Up [I, D], Down [D, I].
type Expert struct{ Gate, Up, Down *compute.Matrix }

// MoE holds a sparse layer's router and experts (spec §6).
type MoE struct {
	Router  *compute.Matrix // gate.weight [E, D]
	Bias    []float32       // e_score_correction_bias [E]
	Experts []Expert
	Shared  Expert // width Ie·S
}

// Layer holds one decoder block: Dense or MoE is set.
type Layer struct {
	InputNorm, PostNorm []float32
	Attn                Attention
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

// Bind maps a checkpoint's tensors onto the model's weights: the names
// save_pretrained writes (routed experts one triple per expert, or
// stacked as experts.gate_up_proj [E, 2Ie, D] and experts.down_proj [E,
// D, Ie]), with matrices in f32, bf16, f16 or FP8 e4m3 with a
// weight_scale_inv block-scale tensor (the Hub checkpoints). The Hub
// checkpoints' multi-token-prediction layers (model.layers.L.. for the
// config's num_nextn_predict_layers) are not used. Every missing,
// unexpected, mis-shaped or non-finite tensor is reported in one error.
func Bind(cfg *Config, ck *safetensors.Checkpoint) (*Weights, error) {
	b := &binder{cfg: cfg, ck: ck, used: map[string]bool{}}
	D, V := cfg.Hidden, cfg.VocabSize
	w := &Weights{Embed: b.matrix("model.embed_tokens.weight", V, D), Norm: b.vector("model.norm.weight", D)}
	if cfg.TieEmbeddings {
		w.Output = w.Embed
	} else {
		w.Output = b.matrix("lm_head.weight", V, D)
	}
	for l := range cfg.NumLayers {
		w.Layers = append(w.Layers, b.layer(l))
	}
	var unexpected []string
	for _, n := range ck.Names() {
		if !b.used[n] && !b.mtp(n) {
			unexpected = append(unexpected, n)
		}
	}
	sort.Strings(unexpected)
	for _, n := range unexpected {
		b.errf("unexpected tensor %q", n)
	}
	if len(b.errs) > 0 {
		return nil, fmt.Errorf("%s: binding %s: %d problems:\n%w", cfg.Family.Name, strings.Join(ck.Files(), ", "), len(b.errs), errors.Join(b.errs...))
	}
	return w, nil
}

// mtp reports whether name belongs to a multi-token-prediction layer.
func (b *binder) mtp(name string) bool {
	rest, ok := strings.CutPrefix(name, "model.layers.")
	if !ok {
		return false
	}
	num, _, _ := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	return err == nil && l >= b.cfg.NumLayers && l < b.cfg.NumLayers+b.cfg.MTPLayers
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

func (b *binder) has(name string) bool { _, ok := b.ck.Tensor(name); return ok }

func (b *binder) layer(l int) Layer {
	cfg := b.cfg
	D, H, q, c := cfg.Hidden, cfg.Heads, cfg.QLoraRank, cfg.KVLoraRank
	n, r, dv := cfg.NopeDim, cfg.RopeDim, cfg.VDim
	p := fmt.Sprintf("model.layers.%d.", l)
	a := p + "self_attn."
	L := Layer{
		InputNorm: b.vector(p+"input_layernorm.weight", D),
		PostNorm:  b.vector(p+"post_attention_layernorm.weight", D),
		Attn: Attention{
			QA:      b.matrix(a+"q_a_proj.weight", q, D),
			QANorm:  b.vector(a+"q_a_layernorm.weight", q),
			QB:      b.matrix(a+"q_b_proj.weight", H*(n+r), q),
			KVA:     b.matrix(a+"kv_a_proj_with_mqa.weight", c+r, D),
			KVANorm: b.vector(a+"kv_a_layernorm.weight", c),
			KVB:     b.matrix(a+"kv_b_proj.weight", H*(n+dv), c),
			O:       b.matrix(a+"o_proj.weight", D, H*dv),
		},
	}
	if cfg.FullIndexer[l] {
		x := a + "indexer."
		Hi, di := cfg.IndexHeads, cfg.IndexDim
		L.Attn.Indexer = &Indexer{
			WqB:         b.matrix(x+"wq_b.weight", Hi*di, q),
			Wk:          b.matrix(x+"wk.weight", di, D),
			KNorm:       b.vector(x+"k_norm.weight", di),
			KBias:       b.vector(x+"k_norm.bias", di),
			WeightsProj: b.matrix(x+"weights_proj.weight", Hi, D),
		}
	}
	m := p + "mlp."
	if cfg.Dense[l] {
		L.Dense = b.expert(m, cfg.Intermediate)
		return L
	}
	E, I := cfg.Experts, cfg.MoEInter
	L.MoE = &MoE{
		Router:  b.matrix(m+"gate.weight", E, D),
		Bias:    b.vector(m+"gate.e_score_correction_bias", E),
		Experts: b.experts(m, E, I),
	}
	if s := b.expert(m+"shared_experts.", I*cfg.SharedExperts); s != nil {
		L.MoE.Shared = *s
	}
	return L
}

func (b *binder) expert(p string, I int) *Expert {
	D := b.cfg.Hidden
	return &Expert{
		Gate: b.matrix(p+"gate_proj.weight", I, D),
		Up:   b.matrix(p+"up_proj.weight", I, D),
		Down: b.matrix(p+"down_proj.weight", D, I),
	}
}

// experts binds the routed experts, one triple per expert or stacked.
func (b *binder) experts(m string, E, I int) []Expert {
	D := b.cfg.Hidden
	if b.has(m + "experts.gate_up_proj") {
		gu := b.stacked(m+"experts.gate_up_proj", E, 2*I, D)
		dn := b.stacked(m+"experts.down_proj", E, D, I)
		if gu == nil || dn == nil {
			return nil
		}
		ex := make([]Expert, E)
		for e := range E {
			ex[e] = Expert{Gate: rowBlock(gu[e], 0, I), Up: rowBlock(gu[e], I, I), Down: dn[e]}
		}
		return ex
	}
	ex := make([]Expert, E)
	for e := range E {
		ex[e] = *b.expert(fmt.Sprintf("%sexperts.%d.", m, e), I)
	}
	return ex
}

// stacked splits an unquantized [E, rows, cols] tensor into per-expert
// matrices.
func (b *binder) stacked(name string, E, rows, cols int) []*compute.Matrix {
	t, ok := b.lookup(name)
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

// matrix binds a [rows, cols] weight stored as f32, bf16 or f16, or as FP8
// e4m3 with its weight_scale_inv tensor of power-of-two block scales.
func (b *binder) matrix(name string, rows, cols int) *compute.Matrix {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		b.errf("tensor %q: shape %v, want [%d %d]", name, t.Shape, rows, cols)
		b.used[name+"_scale_inv"] = b.has(name + "_scale_inv") // reported with its weight
		return nil
	}
	if dt, ok := plainDType(t.DType); ok {
		if !b.finite(name, t) {
			return nil
		}
		return &compute.Matrix{DType: dt, Rows: rows, Cols: cols, Data: t.Data}
	}
	if t.DType != safetensors.F8E4M3 {
		b.errf("tensor %q: dtype %s is not a supported weight format (want F32, BF16, F16 or F8_E4M3)", name, t.DType)
		b.used[name+"_scale_inv"] = b.has(name + "_scale_inv")
		return nil
	}
	blk := b.cfg.FP8Block
	if blk == nil {
		blk = []int{128, 128}
	}
	br, bc := blk[0], blk[1]
	scale := b.scale(name+"_scale_inv", ceilDiv(rows, br), ceilDiv(cols, bc))
	if i := e4m3NaN(t.Data); i >= 0 {
		b.errf("tensor %q: element %d is an e4m3 NaN", name, i)
		return nil
	}
	if scale == nil {
		return nil
	}
	return &compute.Matrix{DType: compute.FP8, Rows: rows, Cols: cols, Data: t.Data, Scale: scale, BlockRows: br, BlockCols: bc, NaNFree: true}
}

// scale binds a block-scale tensor as UE8M0 bytes: F8_E8M0 as stored, or
// float scales (the Hub's weight_scale_inv) when every one is a power of
// two.
func (b *binder) scale(name string, rows, cols int) []byte {
	t, ok := b.lookup(name)
	if !ok {
		return nil
	}
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		b.errf("scale tensor %q: shape %v, want [%d %d]", name, t.Shape, rows, cols)
		return nil
	}
	switch t.DType {
	case safetensors.F8E8M0:
		for i, s := range t.Data {
			if s == 0xFF {
				b.errf("scale tensor %q: element %d is NaN", name, i)
				return nil
			}
		}
		return t.Data
	case safetensors.F32, safetensors.BF16, safetensors.F16:
		v, err := t.Float32s()
		if err != nil {
			b.errf("scale tensor %q: %v", name, err)
			return nil
		}
		out := make([]byte, len(v))
		for i, s := range v {
			frac, exp := math.Frexp(float64(s))
			if frac != 0.5 || exp-1 < -127 || exp-1 > 127 {
				b.errf("scale tensor %q: element %d is %g, not a power of two in UE8M0 range", name, i, s)
				return nil
			}
			out[i] = byte(exp - 1 + 127)
		}
		return out
	}
	b.errf("scale tensor %q: dtype %s, want F32 or F8_E8M0", name, t.DType)
	return nil
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

// finite reports whether every element of a float tensor is finite,
// recording an error naming the first that is not.
func (b *binder) finite(name string, t safetensors.Tensor) bool {
	if i := nonFinite(t.DType, t.Data); i >= 0 {
		b.errf("tensor %q: element %d is not finite (NaN or Inf)", name, i)
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

// e4m3NaN returns the index of the first e4m3 NaN code (0x7F or 0xFF), or
// -1. It reads 8 bytes at a time: a byte b has b&0x7F == 0x7F exactly when
// adding 1 to its low seven bits carries into bit 7.
func e4m3NaN(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		v := binary.LittleEndian.Uint64(b[i:])
		if ((v&0x7F7F7F7F7F7F7F7F)+0x0101010101010101)&0x8080808080808080 != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i]&0x7F == 0x7F {
			return i
		}
	}
	return -1
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
