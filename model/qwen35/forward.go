package qwen35

import (
	"context"
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/quant"
)

// Span is one sequence's part of a batch: Len consecutive tokens of
// Batch.Tokens from Start, continuing State at position State.Len.
type Span struct {
	State      *State
	Start, Len int
	Logits     model.Logits
}

// Batch is one forward step over several sequences, their tokens flattened.
type Batch struct {
	Tokens []int32
	Spans  []Span
}

// Forward runs one step over a ragged batch (spec §2): every matmul runs
// once over all tokens; the convolution, the delta rule and attention run
// per span against its sequence's state, which they update in place. A
// span of one token takes the delta rule's recurrent form, a longer span
// its chunked form (64-token chunks, aligned to sequence positions: see
// GatedDeltaRuleChunked), as the reference does. It returns the logits the spans ask for, in span order,
// VocabSize each, and advances every State.Len by its span's length.
//
// Forward checks the batch before touching any state. If ctx is cancelled
// mid-step the batch's states are left inconsistent: discard them.
func (m *Model) Forward(ctx context.Context, b *Batch) ([]float32, error) {
	if err := m.validate(b); err != nil {
		return nil, err
	}
	cfg := m.Cfg
	T, D := len(b.Tokens), cfg.Hidden
	pos := make([]int32, T)
	for _, s := range b.Spans {
		for i := range s.Len {
			pos[s.Start+i] = int32(s.State.Len + i)
		}
	}
	x := make([]float32, T*D)
	for t, tok := range b.Tokens {
		matrixRow(m.W.Embed, int(tok), x[t*D:(t+1)*D])
	}
	eps := float32(cfg.RMSEps)
	h := make([]float32, T*D)
	for l := range m.W.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		L := &m.W.Layers[l]
		m.be.RMSNormF32(h, x, L.InputNorm, T, D, eps)
		var y []float32
		switch L.Kind {
		case Full:
			y = m.attention(L.Attn, l, h, b, pos)
		case Linear:
			y = m.deltaNet(L.GDN, l, h, b)
		}
		add(x, y)
		m.be.RMSNormF32(h, x, L.PostNorm, T, D, eps)
		if L.MoE != nil {
			y = m.moe(L.MoE, h, T)
		} else {
			y = m.mlp(L.MLP, h, T)
		}
		add(x, y)
	}
	logits := m.head(b, x)
	for _, s := range b.Spans {
		s.State.Len += s.Len
	}
	return logits, nil
}

// Feed runs tokens through one sequence's state, a batch of one span.
func (m *Model) Feed(ctx context.Context, st *State, tokens []int32, logits model.Logits) ([]float32, error) {
	return m.Forward(ctx, &Batch{Tokens: tokens, Spans: []Span{{State: st, Len: len(tokens), Logits: logits}}})
}

// validate checks the batch before anything is computed or changed.
func (m *Model) validate(b *Batch) error {
	covered := 0
	seen := map[*State]bool{}
	for i, s := range b.Spans {
		switch {
		case s.State == nil:
			return fmt.Errorf("qwen35: span %d has no state", i)
		case seen[s.State]:
			return fmt.Errorf("qwen35: span %d: state appears twice in one batch", i)
		case s.Len <= 0 || s.Start != covered || s.Start+s.Len > len(b.Tokens):
			return fmt.Errorf("qwen35: span %d covers tokens [%d,%d) of %d; spans must tile the batch in order", i, s.Start, s.Start+s.Len, len(b.Tokens))
		case !m.Cfg.fits(s.State):
			return fmt.Errorf("qwen35: span %d: state does not have this model's shapes", i)
		case s.State.Len+s.Len > m.Cfg.MaxPosition:
			return fmt.Errorf("qwen35: span %d reaches position %d, beyond the model's %d", i, s.State.Len+s.Len, m.Cfg.MaxPosition)
		}
		seen[s.State] = true
		covered += s.Len
	}
	if covered != len(b.Tokens) {
		return fmt.Errorf("qwen35: spans cover %d of %d tokens", covered, len(b.Tokens))
	}
	for i, t := range b.Tokens {
		if t < 0 || int(t) >= m.Cfg.VocabSize {
			return fmt.Errorf("qwen35: token %d at batch index %d is outside the vocabulary of %d", t, i, m.Cfg.VocabSize)
		}
	}
	return nil
}

// deltaNet is a Gated DeltaNet layer's token mixer on the normed input h
// [T, D] (spec §4).
func (m *Model) deltaNet(w *DeltaNet, l int, h []float32, b *Batch) []float32 {
	cfg := m.Cfg
	T := len(b.Tokens)
	C, K := cfg.ConvDim(), cfg.ConvKernel
	Hk, Hv, dk, dv := cfg.LinKeyHeads, cfg.LinValueHeads, cfg.LinKeyDim, cfg.LinValueDim
	kd, vd := cfg.KeyDim(), cfg.ValueDim()

	qkv := make([]float32, T*C)
	z := make([]float32, T*vd)
	bb := make([]float32, T*Hv)
	a := make([]float32, T*Hv)
	m.be.MatMulF32(qkv, h, T, w.InQKV)
	m.be.MatMulF32(z, h, T, w.InZ)
	m.be.MatMulF32(bb, h, T, w.InB)
	m.be.MatMulF32(a, h, T, w.InA)

	mixed := make([]float32, T*C)
	for _, s := range b.Spans {
		lo, hi := s.Start*C, (s.Start+s.Len)*C
		CausalConv1D(mixed[lo:hi], qkv[lo:hi], s.Len, C, K, w.Conv, s.State.Layers[l].Conv)
	}
	q := make([]float32, T*kd)
	k := make([]float32, T*kd)
	v := make([]float32, T*vd)
	for t := range T {
		row := mixed[t*C : (t+1)*C]
		for i, x := range row {
			row[i] = silu(x)
		}
		copy(q[t*kd:(t+1)*kd], row[:kd])
		copy(k[t*kd:(t+1)*kd], row[kd:2*kd])
		copy(v[t*vd:(t+1)*vd], row[2*kd:])
	}
	l2NormRows(q, dk, float32(1/math.Sqrt(float64(dk))))
	l2NormRows(k, dk, 1)
	g := a // in place: g = -exp(A_log)·softplus(a + dt_bias)
	beta := bb
	for t := range T {
		for j := range Hv {
			g[t*Hv+j] = w.NegA[j] * softplus(a[t*Hv+j]+w.DtBias[j])
			beta[t*Hv+j] = sigmoid(bb[t*Hv+j])
		}
	}

	o := make([]float32, T*vd)
	for _, s := range b.Spans {
		t0, n := s.Start, s.Len
		sh := DeltaShape{T: n, Pos: s.State.Len, Hk: Hk, Hv: Hv, Dk: dk, Dv: dv}
		rows := func(x []float32, w int) []float32 { return x[t0*w : (t0+n)*w] }
		S := s.State.Layers[l].S
		if n == 1 {
			GatedDeltaRule(rows(o, vd), S, rows(q, kd), rows(k, kd), rows(v, vd), rows(g, Hv), rows(beta, Hv), sh)
		} else {
			GatedDeltaRuleChunked(rows(o, vd), S, rows(q, kd), rows(k, kd), rows(v, vd), rows(g, Hv), rows(beta, Hv), sh, DeltaChunk)
		}
	}
	m.be.RMSNormF32(o, o, w.Norm, T*Hv, dv, float32(cfg.RMSEps))
	for i := range o {
		o[i] *= silu(z[i])
	}
	out := make([]float32, T*cfg.Hidden)
	m.be.MatMulF32(out, o, T, w.OutProj)
	return out
}

// attention is a gated full-attention layer's token mixer on the normed
// input h [T, D] (spec §3).
func (m *Model) attention(w *Attention, l int, h []float32, b *Batch, pos []int32) []float32 {
	cfg := m.Cfg
	T := len(b.Tokens)
	Hq, Hkv, d := cfg.Heads, cfg.KVHeads, cfg.HeadDim
	eps := float32(cfg.RMSEps)

	qg := make([]float32, T*Hq*2*d)
	m.be.MatMulF32(qg, h, T, w.QProj)
	q := make([]float32, T*Hq*d)
	gate := make([]float32, T*Hq*d)
	for t := range T {
		for hh := range Hq {
			src := qg[(t*Hq+hh)*2*d:]
			copy(q[(t*Hq+hh)*d:(t*Hq+hh+1)*d], src[:d])
			copy(gate[(t*Hq+hh)*d:(t*Hq+hh+1)*d], src[d:2*d])
		}
	}
	k := make([]float32, T*Hkv*d)
	v := make([]float32, T*Hkv*d)
	m.be.MatMulF32(k, h, T, w.KProj)
	m.be.MatMulF32(v, h, T, w.VProj)
	m.be.RMSNormF32(q, q, w.QNorm, T*Hq, d, eps)
	m.be.RMSNormF32(k, k, w.KNorm, T*Hkv, d, eps)
	posQ := make([]int32, T*Hq)
	posK := make([]int32, T*Hkv)
	for t := range T {
		for hh := range Hq {
			posQ[t*Hq+hh] = pos[t]
		}
		for hh := range Hkv {
			posK[t*Hkv+hh] = pos[t]
		}
	}
	tmp := make([]float32, T*Hq*cfg.RopeDim)
	RopeHalf(m.be, q, T*Hq, d, posQ, m.invFreq, tmp)
	RopeHalf(m.be, k, T*Hkv, d, posK, m.invFreq, tmp)

	o := make([]float32, T*Hq*d)
	kvw := Hkv * d
	for _, s := range b.Spans {
		st := &s.State.Layers[l]
		st.K = append(st.K, k[s.Start*kvw:(s.Start+s.Len)*kvw]...)
		st.V = append(st.V, v[s.Start*kvw:(s.Start+s.Len)*kvw]...)
		sh := AttnShape{N: s.Len, Past: s.State.Len, Hq: Hq, Hkv: Hkv, D: d}
		scores := make([]float32, Hq*(s.State.Len+s.Len))
		Attend(m.be, o[s.Start*Hq*d:(s.Start+s.Len)*Hq*d], q[s.Start*Hq*d:(s.Start+s.Len)*Hq*d], st.K, st.V, sh, scores)
	}
	for i := range o {
		o[i] *= sigmoid(gate[i])
	}
	out := make([]float32, T*cfg.Hidden)
	m.be.MatMulF32(out, o, T, w.OProj)
	return out
}

// head computes the logits of the rows the spans ask for: the final norm
// and the output projection.
func (m *Model) head(b *Batch, x []float32) []float32 {
	D, V := m.Cfg.Hidden, m.Cfg.VocabSize
	var rows []int
	for _, s := range b.Spans {
		switch s.Logits {
		case model.LastLogits:
			rows = append(rows, s.Start+s.Len-1)
		case model.AllLogits:
			for i := range s.Len {
				rows = append(rows, s.Start+i)
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	R := len(rows)
	sel := make([]float32, R*D)
	for i, r := range rows {
		copy(sel[i*D:(i+1)*D], x[r*D:(r+1)*D])
	}
	m.be.RMSNormF32(sel, sel, m.W.Norm, R, D, float32(m.Cfg.RMSEps))
	out := make([]float32, R*V)
	m.be.MatMulF32(out, sel, R, m.W.Output)
	return out
}

// add computes x += y.
func add(x, y []float32) {
	y = y[:len(x)]
	for i := range x {
		x[i] += y[i]
	}
}

// matrixRow decodes row r of an F32, BF16 or F16 matrix into dst.
func matrixRow(w *compute.Matrix, r int, dst []float32) {
	n := w.Cols
	switch w.DType {
	case compute.F32:
		b := w.Data[r*n*4 : (r+1)*n*4]
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
		}
	case compute.BF16:
		b := w.Data[r*n*2 : (r+1)*n*2]
		for i := range dst {
			dst[i] = quant.BF16ToFloat32(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		}
	case compute.F16:
		b := w.Data[r*n*2 : (r+1)*n*2]
		for i := range dst {
			dst[i] = quant.F16ToFloat32(uint16(b[2*i]) | uint16(b[2*i+1])<<8)
		}
	default:
		panic(fmt.Sprintf("qwen35: cannot read rows of a %v matrix", w.DType))
	}
}
