package deepseekv4

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
	"github.com/strata-inference/strata/safetensors"
)

// HC holds the weights of one mHC site (spec §3): fn [(2+hc)·hc, hc·D], base, scale [3].
type HC struct {
	Fn    *compute.Matrix
	Base  []float32
	Scale []float32
}

// Compressor holds one compressor's weights: Wkv and Wgate are [c·w, D] with
// c = 2 for overlapping (CSA) compressors; Ape is [rate, c·w]; Norm is [w].
type Compressor struct {
	Wkv, Wgate *compute.Matrix
	Ape        []float32
	Norm       []float32
}

// Indexer holds the lightning indexer of a CSA layer.
type Indexer struct {
	Comp        Compressor
	WqB         *compute.Matrix // [nI·dI, q_lora_rank]
	WeightsProj *compute.Matrix // [nI, D]
}

// Attention holds one layer's attention weights.
type Attention struct {
	WqA, WqB, Wkv *compute.Matrix
	// WoA is the grouped output projection, one [R, H·d/G] block per group.
	WoA           []*compute.Matrix
	WoB           *compute.Matrix
	QNorm, KVNorm []float32
	Sink          []float32
	Comp          *Compressor // nil for window-only layers
	Indexer       *Indexer    // CSA layers only
}

// Expert is one SwiGLU expert: W1 (gate) and W3 (up) are [I, D], W2 (down) [D, I].
type Expert struct{ W1, W2, W3 *compute.Matrix }

// MoE holds one layer's routed and shared experts.
type MoE struct {
	Gate    *compute.Matrix // [E, D] router
	Bias    []float32       // [E] selection bias; nil for hash layers
	Tid2Eid []int32         // [V·K] token id -> experts; hash layers only
	Experts []Expert
	Shared  Expert
}

// Layer holds one decoder block.
type Layer struct {
	AttnNorm, FFNNorm []float32
	HCAttn, HCFFN     HC
	Attn              Attention
	FFN               MoE
}

// Head is the final stream collapse, norm and output projection.
type Head struct {
	HCFn    *compute.Matrix // [hc, hc·D]
	HCBase  []float32
	HCScale []float32
	Norm    []float32
}

// MTPLayer is one multi-token-prediction block (mtp.N.*).
type MTPLayer struct {
	Block        Layer
	EProj, HProj *compute.Matrix
	ENorm, HNorm []float32
	Head         Head // its own hc_head and norm; the output matrix is shared
}

// Weights is a bound checkpoint. Matrices point into the checkpoint's memory map.
type Weights struct {
	Embed  *compute.Matrix // [V, D], rows read by token id
	Output *compute.Matrix // [V, D]
	Head   Head
	Layers []Layer
	MTP    []MTPLayer
}

// canonicalName maps a tensor name of any supported naming to the released
// checkpoint's name. The namings are the released checkpoint's, transformers'
// module names (spec §2) and what transformers' save_pretrained writes (module
// prefix, released inner names, kv_norm saved as attn.norm).
func canonicalName(name string) string {
	n := strings.TrimPrefix(name, "model.")
	switch n {
	case "embed_tokens.weight":
		return "embed.weight"
	case "lm_head.weight":
		return "head.weight"
	case "hc_head.hc_fn", "hc_head.hc_base", "hc_head.hc_scale":
		return "hc_head_" + strings.TrimPrefix(n, "hc_head.hc_")
	}
	n = strings.ReplaceAll(n, ".weight_scale_inv", ".scale")
	for _, r := range nameRewrites {
		n = r.re.ReplaceAllString(n, r.to)
	}
	return n
}

type rewrite struct {
	re *regexp.Regexp
	to string
}

// nameRewrites turn transformers' module names into released names inside a
// block prefix (layers.N. or mtp.N.). Order matters: the indexer's names are
// rewritten before the compressor's.
var nameRewrites = func() []rewrite {
	pairs := []struct{ from, to string }{
		{`\.input_layernorm\.`, ".attn_norm."},
		{`\.post_attention_layernorm\.`, ".ffn_norm."},
		{`\.(attn|ffn)_hc\.(fn|base|scale)$`, ".hc_${1}_${2}"},
		{`\.self_attn\.`, ".attn."},
		{`\.attn\.compressor\.indexer\.scorer\.weights_proj\.`, ".attn.indexer.weights_proj."},
		{`\.attn\.compressor\.indexer\.q_b_proj\.`, ".attn.indexer.wq_b."},
		{`\.attn\.compressor\.indexer\.`, ".attn.indexer.compressor."},
		{`compressor\.kv_proj\.`, "compressor.wkv."},
		{`compressor\.gate_proj\.`, "compressor.wgate."},
		{`compressor\.position_bias$`, "compressor.ape"},
		{`compressor\.kv_norm\.`, "compressor.norm."},
		{`\.attn\.q_a_proj\.`, ".attn.wq_a."},
		{`\.attn\.q_a_norm\.`, ".attn.q_norm."},
		{`\.attn\.q_b_proj\.`, ".attn.wq_b."},
		{`\.attn\.kv_proj\.`, ".attn.wkv."},
		{`\.attn\.norm\.`, ".attn.kv_norm."},
		{`\.attn\.o_a_proj\.`, ".attn.wo_a."},
		{`\.attn\.o_b_proj\.`, ".attn.wo_b."},
		{`\.attn\.sinks$`, ".attn.attn_sink"},
		{`\.mlp\.`, ".ffn."},
		{`\.ffn\.gate\.e_score_correction_bias$`, ".ffn.gate.bias"},
		{`\.shared_experts\.gate_proj\.`, ".shared_experts.w1."},
		{`\.shared_experts\.up_proj\.`, ".shared_experts.w3."},
		{`\.shared_experts\.down_proj\.`, ".shared_experts.w2."},
	}
	rs := make([]rewrite, len(pairs))
	for i, p := range pairs {
		rs[i] = rewrite{regexp.MustCompile(p.from), p.to}
	}
	return rs
}()

// binder looks tensors up by canonical name and records every problem.
type binder struct {
	cfg    *Config
	byName map[string]string // canonical -> stored name
	ck     *safetensors.Checkpoint
	used   map[string]bool // canonical names consumed
	errs   []error
}

// Bind maps a checkpoint's tensors onto the model's weights, checking names,
// shapes and dtypes. It reports every missing, unexpected or malformed tensor
// at once.
func Bind(cfg *Config, ck *safetensors.Checkpoint) (*Weights, error) {
	return bind(cfg, ck, len(cfg.Layers), 0)
}

// bind is Bind where layers from stored on, which the checkpoint does not
// hold, bind the tensors of its last period layers in turn (LoadDeep).
func bind(cfg *Config, ck *safetensors.Checkpoint, stored, period int) (*Weights, error) {
	b := &binder{cfg: cfg, byName: map[string]string{}, ck: ck, used: map[string]bool{}}
	for _, name := range ck.Names() {
		c := canonicalName(name)
		if prev, dup := b.byName[c]; dup {
			b.errf("tensors %q and %q are the same weight %q", prev, name, c)
			continue
		}
		b.byName[c] = name
	}
	D := cfg.Hidden
	w := &Weights{
		Embed:  b.matrix("embed.weight", cfg.VocabSize, D),
		Output: nil,
	}
	if cfg.TieEmbeddings {
		w.Output = w.Embed
	} else {
		w.Output = b.matrix("head.weight", cfg.VocabSize, D)
	}
	w.Head = b.head("")
	w.Layers = make([]Layer, len(cfg.Layers))
	for i, l := range cfg.Layers {
		src := i
		if i >= stored {
			src = stored - period + (i-stored)%period
		}
		w.Layers[i] = b.layer(fmt.Sprintf("layers.%d.", src), l)
	}
	for i, l := range cfg.MTP {
		p := fmt.Sprintf("mtp.%d.", i)
		w.MTP = append(w.MTP, MTPLayer{
			Block: b.layer(p, l),
			EProj: b.matrix(p+"e_proj.weight", D, D),
			HProj: b.matrix(p+"h_proj.weight", D, D),
			ENorm: b.vector(p+"enorm.weight", D),
			HNorm: b.vector(p+"hnorm.weight", D),
			Head:  b.head(p),
		})
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
	if n := len(b.errs); n > 0 {
		shown := b.errs
		if n > maxReported {
			// A wrong config (hidden_size, say) fails every tensor: the
			// first problems say what, the count how far it goes.
			shown = append(shown[:maxReported:maxReported], fmt.Errorf("… and %d more problems", n-maxReported))
		}
		return nil, fmt.Errorf("deepseekv4: binding %s: %d problems:\n%w", strings.Join(ck.Files(), ", "), n, errors.Join(shown...))
	}
	return w, nil
}

// maxReported is how many binding problems an error lists.
const maxReported = 12

func (b *binder) errf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf(format, args...))
}

func (b *binder) lookup(name string) (safetensors.Tensor, bool) {
	stored, ok := b.byName[name]
	if !ok {
		return safetensors.Tensor{}, false
	}
	b.used[name] = true
	return b.ck.Tensor(stored)
}

func (b *binder) has(name string) bool { _, ok := b.byName[name]; return ok }

func (b *binder) head(p string) Head {
	hc, D := b.cfg.HCMult, b.cfg.Hidden
	return Head{
		HCFn:    b.f32Matrix(p+"hc_head_fn", hc, hc*D),
		HCBase:  b.vector(p+"hc_head_base", hc),
		HCScale: b.vector(p+"hc_head_scale", 1),
		Norm:    b.vector(p+"norm.weight", D),
	}
}

func (b *binder) hc(p, site string) HC {
	hc, D := b.cfg.HCMult, b.cfg.Hidden
	mix := (2 + hc) * hc
	return HC{
		Fn:    b.f32Matrix(p+"hc_"+site+"_fn", mix, hc*D),
		Base:  b.vector(p+"hc_"+site+"_base", mix),
		Scale: b.vector(p+"hc_"+site+"_scale", 3),
	}
}

func (b *binder) compressor(p string, width, c, rate int) Compressor {
	D := b.cfg.Hidden
	return Compressor{
		Wkv:   b.matrix(p+"wkv.weight", c*width, D),
		Wgate: b.matrix(p+"wgate.weight", c*width, D),
		Ape:   b.vector(p+"ape", rate*c*width),
		Norm:  b.vector(p+"norm.weight", width),
	}
}

func (b *binder) layer(p string, l LayerSpec) Layer {
	cfg := b.cfg
	D, H, d, q := cfg.Hidden, cfg.Heads, cfg.HeadDim, cfg.QLoraRank
	G, R := cfg.OGroups, cfg.OLoraRank
	a := p + "attn."
	L := Layer{
		AttnNorm: b.vector(p+"attn_norm.weight", D),
		FFNNorm:  b.vector(p+"ffn_norm.weight", D),
		HCAttn:   b.hc(p, "attn"),
		HCFFN:    b.hc(p, "ffn"),
	}
	L.Attn = Attention{
		WqA:    b.matrix(a+"wq_a.weight", q, D),
		QNorm:  b.vector(a+"q_norm.weight", q),
		WqB:    b.matrix(a+"wq_b.weight", H*d, q),
		Wkv:    b.matrix(a+"wkv.weight", d, D),
		KVNorm: b.vector(a+"kv_norm.weight", d),
		WoB:    b.matrix(a+"wo_b.weight", D, G*R),
		Sink:   b.vector(a+"attn_sink", H),
	}
	if woa := b.matrix(a+"wo_a.weight", G*R, H*d/G); woa != nil {
		for g := range G {
			L.Attn.WoA = append(L.Attn.WoA, rowBlock(woa, g*R, R))
		}
	}
	switch l.Attn {
	case HCA:
		comp := b.compressor(a+"compressor.", d, 1, l.Rate)
		L.Attn.Comp = &comp
	case CSA:
		comp := b.compressor(a+"compressor.", d, 2, l.Rate)
		L.Attn.Comp = &comp
		L.Attn.Indexer = &Indexer{
			Comp:        b.compressor(a+"indexer.compressor.", cfg.IndexHeadDim, 2, l.Rate),
			WqB:         b.matrix(a+"indexer.wq_b.weight", cfg.IndexHeads*cfg.IndexHeadDim, q),
			WeightsProj: b.matrix(a+"indexer.weights_proj.weight", cfg.IndexHeads, D),
		}
	}
	f := p + "ffn."
	E, I := cfg.Experts, cfg.MoEInter
	L.FFN = MoE{
		Gate: b.matrix(f+"gate.weight", E, D),
		Shared: Expert{
			W1: b.matrix(f+"shared_experts.w1.weight", I, D),
			W2: b.matrix(f+"shared_experts.w2.weight", D, I),
			W3: b.matrix(f+"shared_experts.w3.weight", I, D),
		},
	}
	if l.Hash {
		L.FFN.Tid2Eid = b.tid2eid(f + "gate.tid2eid")
	} else {
		L.FFN.Bias = b.vector(f+"gate.bias", E)
	}
	L.FFN.Experts = b.experts(f, E, I, D)
	return L
}

// experts binds routed experts stored one tensor per expert (released and
// saved namings) or stacked as gate_up_proj [E, 2I, D] and down_proj [E, D, I].
func (b *binder) experts(f string, E, I, D int) []Expert {
	if b.has(f + "experts.gate_up_proj") {
		gu := b.stacked(f+"experts.gate_up_proj", E, 2*I, D)
		dn := b.stacked(f+"experts.down_proj", E, D, I)
		if gu == nil || dn == nil {
			return nil
		}
		ex := make([]Expert, E)
		for e := range E {
			ex[e] = Expert{W1: rowBlock(gu[e], 0, I), W3: rowBlock(gu[e], I, I), W2: dn[e]}
		}
		return ex
	}
	ex := make([]Expert, E)
	for e := range E {
		p := fmt.Sprintf("%sexperts.%d.", f, e)
		ex[e] = Expert{
			W1: b.matrix(p+"w1.weight", I, D),
			W2: b.matrix(p+"w2.weight", D, I),
			W3: b.matrix(p+"w3.weight", I, D),
		}
	}
	return ex
}

// stacked splits an unquantized [E, rows, cols] tensor into per-expert matrices.
func (b *binder) stacked(name string, E, rows, cols int) []*compute.Matrix {
	t, ok := b.lookup(name)
	if !ok {
		b.errf("missing tensor %q", name)
		return nil
	}
	dt, ok := plainDType(t.DType)
	if !ok || len(t.Shape) != 3 || t.Shape[0] != E || t.Shape[1] != rows || t.Shape[2] != cols {
		b.errf("tensor %q: %s %v, want an f32/bf16/f16 [%d %d %d]", b.byName[name], t.DType, t.Shape, E, rows, cols)
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
	case "F32":
		return compute.F32, true
	case "BF16":
		return compute.BF16, true
	case "F16":
		return compute.F16, true
	}
	return 0, false
}

// matrix binds a [rows, cols] weight in any stored format: f32/bf16/f16, FP8
// e4m3 with a .scale block tensor, or packed FP4 (I8/U8 [rows, cols/2]) with a
// .scale tensor of one UE8M0 per 32 columns.
func (b *binder) matrix(name string, rows, cols int) *compute.Matrix {
	t, ok := b.lookup(name)
	if !ok {
		b.errf("missing tensor %q", name)
		return nil
	}
	stored := b.byName[name]
	scaleName := strings.TrimSuffix(name, ".weight") + ".scale"
	shapeIs := func(r, c int) bool { return len(t.Shape) == 2 && t.Shape[0] == r && t.Shape[1] == c }
	if dt, ok := plainDType(t.DType); ok {
		if !shapeIs(rows, cols) {
			b.errf("tensor %q: shape %v, want [%d %d]", stored, t.Shape, rows, cols)
			return nil
		}
		return &compute.Matrix{DType: dt, Rows: rows, Cols: cols, Data: t.Data}
	}
	switch t.DType {
	case "F8_E4M3":
		if !shapeIs(rows, cols) {
			b.errf("tensor %q: shape %v, want [%d %d]", stored, t.Shape, rows, cols)
			return nil
		}
		blk := b.cfg.FP8Block
		if blk == nil {
			blk = []int{128, 128}
		}
		br, bc := blk[0], blk[1]
		scale := b.scale(scaleName, ceilDiv(rows, br), ceilDiv(cols, bc))
		if scale == nil {
			return nil
		}
		return &compute.Matrix{DType: compute.FP8, Rows: rows, Cols: cols, Data: t.Data, Scale: scale, BlockRows: br, BlockCols: bc, NaNFree: !hasE4M3NaN(t.Data)}
	case "I8", "U8":
		if cols%compute.FP4GroupSize != 0 || !shapeIs(rows, cols/2) {
			b.errf("tensor %q: packed FP4 shape %v, want [%d %d] (%d columns, a multiple of %d)", stored, t.Shape, rows, cols/2, cols, compute.FP4GroupSize)
			return nil
		}
		scale := b.scale(scaleName, rows, cols/compute.FP4GroupSize)
		if scale == nil {
			return nil
		}
		return &compute.Matrix{DType: compute.FP4, Rows: rows, Cols: cols, Data: t.Data, Scale: scale}
	}
	b.errf("tensor %q: dtype %s is not a supported weight format", stored, t.DType)
	b.used[scaleName] = b.has(scaleName) // reported with its weight
	return nil
}

// scale binds a block-scale tensor as UE8M0 bytes. F32 scales (transformers'
// weight_scale_inv) are accepted when every value is a power of two.
func (b *binder) scale(name string, rows, cols int) []byte {
	t, ok := b.lookup(name)
	if !ok {
		b.errf("missing scale tensor %q", name)
		return nil
	}
	stored := b.byName[name]
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		b.errf("scale tensor %q: shape %v, want [%d %d]", stored, t.Shape, rows, cols)
		return nil
	}
	switch t.DType {
	case "F8_E8M0", "U8":
		// 0xFF is UE8M0's NaN: a block whose scale it is has no value.
		if i := bytes.IndexByte(t.Data, 0xFF); i >= 0 {
			b.errf("scale tensor %q: NaN (0xFF) at %d", stored, i)
			return nil
		}
		return t.Data
	case "F32", "BF16", "F16":
		v, err := t.Float32s()
		if err != nil {
			b.errf("scale tensor %q: %v", stored, err)
			return nil
		}
		out := make([]byte, len(v))
		for i, s := range v {
			frac, exp := math.Frexp(float64(s))
			if frac != 0.5 || exp-1 < -127 || exp-1 > 127 {
				b.errf("scale tensor %q: value %g at %d is not a power of two in UE8M0 range", stored, s, i)
				return nil
			}
			out[i] = byte(exp - 1 + 127)
		}
		return out
	}
	b.errf("scale tensor %q: dtype %s, want F8_E8M0", stored, t.DType)
	return nil
}

// f32Matrix binds a small matrix that the forward pass computes in float32
// (mHC weights); any float dtype is converted.
func (b *binder) f32Matrix(name string, rows, cols int) *compute.Matrix {
	v := b.vector(name, rows*cols)
	if v == nil {
		return nil
	}
	if t, _ := b.ck.Tensor(b.byName[name]); len(t.Shape) != 2 || t.Shape[0] != rows {
		b.errf("tensor %q: shape %v, want [%d %d]", b.byName[name], t.Shape, rows, cols)
		return nil
	}
	return f32Mat(v, rows, cols)
}

// vector binds a float tensor of n elements (any float dtype, any shape with n elements), converted to float32.
func (b *binder) vector(name string, n int) []float32 {
	t, ok := b.lookup(name)
	if !ok {
		b.errf("missing tensor %q", name)
		return nil
	}
	if t.NumElements() != n {
		b.errf("tensor %q: shape %v has %d elements, want %d", b.byName[name], t.Shape, t.NumElements(), n)
		return nil
	}
	v, err := t.Float32s()
	if err != nil {
		b.errf("tensor %q: %v", b.byName[name], err)
		return nil
	}
	// Norm weights, mHC scales and biases, sinks: one NaN or Inf here
	// poisons every logit, so it is an error at load, not at the first
	// request.
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			b.errf("tensor %q: %g at %d (weights must be finite)", b.byName[name], x, i)
			return nil
		}
	}
	return v
}

func (b *binder) tid2eid(name string) []int32 {
	t, ok := b.lookup(name)
	if !ok {
		b.errf("missing tensor %q", name)
		return nil
	}
	V, K, E := b.cfg.VocabSize, b.cfg.ExpertsPerTok, b.cfg.Experts
	if len(t.Shape) != 2 || t.Shape[0] != V || t.Shape[1] != K {
		b.errf("tensor %q: shape %v, want [%d %d]", b.byName[name], t.Shape, V, K)
		return nil
	}
	v, err := t.Int64s()
	if err != nil {
		b.errf("tensor %q: %v", b.byName[name], err)
		return nil
	}
	out := make([]int32, len(v))
	for i, e := range v {
		if e < 0 || e >= int64(E) {
			b.errf("tensor %q: token %d routes to expert %d of %d", b.byName[name], i/K, e, E)
			return nil
		}
		out[i] = int32(e)
	}
	return out
}

func f32Mat(v []float32, rows, cols int) *compute.Matrix {
	data := make([]byte, 4*len(v))
	for i, x := range v {
		u := math.Float32bits(x)
		data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return &compute.Matrix{DType: compute.F32, Rows: rows, Cols: cols, Data: data}
}

// rowBlock returns rows [lo, lo+n) of m as a matrix sharing m's memory. An FP8
// block that the cut does not align with is dequantized to float32 instead.
func rowBlock(m *compute.Matrix, lo, n int) *compute.Matrix {
	if m == nil {
		return nil
	}
	rowBytes := len(m.Data) / m.Rows
	out := &compute.Matrix{DType: m.DType, Rows: n, Cols: m.Cols, Data: m.Data[lo*rowBytes : (lo+n)*rowBytes], BlockRows: m.BlockRows, BlockCols: m.BlockCols, NaNFree: m.NaNFree}
	switch m.DType {
	case compute.FP4:
		g := m.Cols / compute.FP4GroupSize
		out.Scale = m.Scale[lo*g : (lo+n)*g]
	case compute.FP8:
		if lo%m.BlockRows != 0 {
			return f32Mat(dequantRows(m, lo, n), n, m.Cols)
		}
		bc := ceilDiv(m.Cols, m.BlockCols)
		out.Scale = m.Scale[lo/m.BlockRows*bc : ceilDiv(lo+n, m.BlockRows)*bc]
	}
	return out
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// dequantRows decodes rows [lo, lo+n) of an FP8 block-scaled matrix.
func dequantRows(m *compute.Matrix, lo, n int) []float32 {
	out := make([]float32, n*m.Cols)
	bc := ceilDiv(m.Cols, m.BlockCols)
	for r := range n {
		row := lo + r
		for c := range m.Cols {
			s := quant.UE8M0ToFloat32(m.Scale[row/m.BlockRows*bc+c/m.BlockCols])
			out[r*m.Cols+c] = quant.E4M3ToFloat32(m.Data[row*m.Cols+c]) * s
		}
	}
	return out
}

// hasE4M3NaN reports whether FP8 data holds a NaN code (0x7F or 0xFF). It
// reads 8 bytes at a time: a byte b has b&0x7F == 0x7F exactly when adding
// 1 to its low seven bits carries into bit 7.
func hasE4M3NaN(b []byte) bool {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		v := binary.LittleEndian.Uint64(b[i:])
		if ((v&0x7F7F7F7F7F7F7F7F)+0x0101010101010101)&0x8080808080808080 != 0 {
			return true
		}
	}
	for ; i < len(b); i++ {
		if b[i]&0x7F == 0x7F {
			return true
		}
	}
	return false
}
