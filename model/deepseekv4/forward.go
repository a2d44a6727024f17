package deepseekv4

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/quant"
)

// Forward runs one step over a ragged batch: every span continues its
// sequence at position Seq.Len, every matmul runs once over all tokens, and
// each sequence's cache is read and updated in place. It returns the logits
// the spans ask for, LogitRows(b) rows of VocabSize, in span order, and
// advances each Seq.Len by its span's length.
//
// Forward reserves the pages the spans need first and fails without touching
// any cache when the pool is short. If ctx is cancelled mid-step the caches of
// the batch's sequences are left inconsistent: release them.
func (m *Model) Forward(ctx context.Context, b *Batch) ([]float32, error) {
	if err := m.validate(b); err != nil {
		return nil, err
	}
	for i, s := range b.Spans {
		if err := s.Seq.Reserve(s.Seq.Len + s.Len); err != nil {
			return nil, fmt.Errorf("deepseekv4: span %d: %w", i, err)
		}
	}
	cfg := m.Cfg
	T, D, hc := len(b.Tokens), cfg.Hidden, cfg.HCMult
	pos := make([]int32, T)
	for _, s := range b.Spans {
		for i := range s.Len {
			pos[s.Start+i] = int32(s.Seq.Len + i)
		}
	}
	// Streams: every token's embedding copied into hc streams.
	h := make([]float32, T*hc*D)
	for t, tok := range b.Tokens {
		row := h[t*hc*D : t*hc*D+D]
		matrixRow(m.W.Embed, int(tok), row)
		for j := 1; j < hc; j++ {
			copy(h[t*hc*D+j*D:], row)
		}
	}
	for l := range m.W.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.s.reset()
		m.layer(&m.W.Layers[l], m.Cfg.Layers[l], &m.layout.layers[l], b, pos, h)
	}
	m.s.reset()
	logits := m.head(&m.W.Head, b, h)
	for _, s := range b.Spans {
		s.Seq.Len += s.Len
	}
	return logits, nil
}

// layer runs decoder block L on the streams h [T, hc, D] in place, its
// cache kinds found through refs.
func (m *Model) layer(L *Layer, spec LayerSpec, refs *layerRefs, b *Batch, pos []int32, h []float32) {
	cfg := m.Cfg
	T, D := len(b.Tokens), cfg.Hidden
	eps := float32(cfg.RMSEps)

	x, post, comb := m.hcPre(&L.HCAttn, h, T)
	m.be.RMSNorm(x, x, L.AttnNorm, T, D, eps)
	y := m.attention(&L.Attn, spec, refs, x, b, pos)
	m.hcPost(h, y, post, comb, T)

	x, post, comb = m.hcPre(&L.HCFFN, h, T)
	m.be.RMSNorm(x, x, L.FFNNorm, T, D, eps)
	y = m.moe(&L.FFN, x, b.Tokens)
	m.hcPost(h, y, post, comb, T)
}

// hcPre computes an mHC site's pre, post and comb weights from the streams
// and returns the sub-block input x = Σ_j pre_j·h_j [T, D], post [T, hc] and
// comb [T, hc, hc] (spec §3, "mHC site").
func (m *Model) hcPre(w *HC, h []float32, T int) (x, post, comb []float32) {
	cfg := m.Cfg
	hc, D := cfg.HCMult, cfg.Hidden
	nMix := (2 + hc) * hc
	flat := m.s.get(T * hc * D)
	m.be.RMSNorm(flat, h, nil, T, hc*D, float32(cfg.RMSEps))
	mix := m.s.get(T * nMix)
	m.be.MatMul(mix, flat, T, w.Fn)

	x = m.s.get(T * D)
	post = m.s.get(T * hc)
	comb = m.s.get(T * hc * hc)
	pre := make([]float32, hc)
	eps := float32(cfg.HCEps)
	for t := range T {
		mx := mix[t*nMix : (t+1)*nMix]
		for j := range hc {
			pre[j] = sigmoid(mx[j]*w.Scale[0]+w.Base[j]) + eps
			post[t*hc+j] = 2 * sigmoid(mx[hc+j]*w.Scale[1]+w.Base[hc+j])
		}
		c := comb[t*hc*hc : (t+1)*hc*hc]
		for i := range c {
			c[i] = mx[2*hc+i]*w.Scale[2] + w.Base[2*hc+i]
		}
		sinkhorn(c, hc, cfg.SinkhornIters, eps)
		xt := x[t*D : (t+1)*D]
		for j := range hc {
			axpy(xt, pre[j], h[(t*hc+j)*D:(t*hc+j+1)*D])
		}
	}
	return x, post, comb
}

// sinkhorn turns the hc×hc logits c (row j = input stream, column k = output
// stream) into a doubly stochastic matrix: softmax over each row plus eps,
// normalise columns, then iters-1 rounds of rows then columns, each sum + eps.
func sinkhorn(c []float32, hc, iters int, eps float32) {
	for j := range hc {
		row := c[j*hc : (j+1)*hc]
		softmaxInPlace(row)
		for k := range row {
			row[k] += eps
		}
	}
	cols := func() {
		for k := range hc {
			var s float32
			for j := range hc {
				s += c[j*hc+k]
			}
			s += eps
			for j := range hc {
				c[j*hc+k] /= s
			}
		}
	}
	rows := func() {
		for j := range hc {
			row := c[j*hc : (j+1)*hc]
			var s float32
			for _, v := range row {
				s += v
			}
			s += eps
			for k := range row {
				row[k] /= s
			}
		}
	}
	cols()
	for range iters - 1 {
		rows()
		cols()
	}
}

// hcPost writes the site's output back into the streams:
// h'[k] = post[k]·y + Σ_j comb[j][k]·h[j].
func (m *Model) hcPost(h, y, post, comb []float32, T int) {
	hc, D := m.Cfg.HCMult, m.Cfg.Hidden
	old := make([]float32, hc*D)
	for t := range T {
		ht := h[t*hc*D : (t+1)*hc*D]
		copy(old, ht)
		yt := y[t*D : (t+1)*D]
		c := comb[t*hc*hc:]
		for k := range hc {
			dst := ht[k*D : (k+1)*D]
			pk := post[t*hc+k]
			for i := range dst {
				dst[i] = pk * yt[i]
			}
			for j := range hc {
				axpy(dst, c[j*hc+k], old[j*D:(j+1)*D])
			}
		}
	}
}

// head computes the logits of the rows the spans ask for: collapse the
// streams with hc_head, RMSNorm, and the output projection. With
// b.WantHidden it also copies every token's streams into b.Hidden.
func (m *Model) head(w *Head, b *Batch, h []float32) []float32 {
	V := m.Cfg.VocabSize
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
	R := len(rows)
	if b.WantHidden {
		b.Hidden = append(b.Hidden[:0], h...)
	}
	if R == 0 {
		return nil
	}
	x := m.collapse(w, h, rows)
	out := make([]float32, R*V)
	m.be.MatMul(out, x, R, m.W.Output)
	return out
}

// collapse applies a Head's stream collapse and norm to the given token rows
// of the streams h, returning [len(rows), D].
func (m *Model) collapse(w *Head, h []float32, rows []int) []float32 {
	cfg := m.Cfg
	hc, D := cfg.HCMult, cfg.Hidden
	R := len(rows)
	sel := m.s.get(R * hc * D)
	for i, r := range rows {
		copy(sel[i*hc*D:(i+1)*hc*D], h[r*hc*D:(r+1)*hc*D])
	}
	flat := m.s.get(R * hc * D)
	m.be.RMSNorm(flat, sel, nil, R, hc*D, float32(cfg.RMSEps))
	mix := m.s.get(R * hc)
	m.be.MatMul(mix, flat, R, w.HCFn)
	x := m.s.get(R * D)
	eps := float32(cfg.HCEps)
	for i := range R {
		for j := range hc {
			pre := sigmoid(mix[i*hc+j]*w.HCScale[0]+w.HCBase[j]) + eps
			axpy(x[i*D:(i+1)*D], pre, sel[(i*hc+j)*D:(i*hc+j+1)*D])
		}
	}
	m.be.RMSNorm(x, x, w.Norm, R, D, float32(cfg.RMSEps))
	return x
}

// matrixRow decodes row r of an unquantized matrix into dst.
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
	case compute.FP8:
		bc := (w.Cols + w.BlockCols - 1) / w.BlockCols
		for i := range dst {
			s := quant.UE8M0ToFloat32(w.Scale[r/w.BlockRows*bc+i/w.BlockCols])
			dst[i] = quant.E4M3ToFloat32(w.Data[r*n+i]) * s
		}
	default:
		panic(fmt.Sprintf("deepseekv4: cannot read rows of a %v matrix", w.DType))
	}
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// axpy computes y += a·x.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// softmaxInPlace replaces x by its softmax.
func softmaxInPlace(x []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	var s float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		s += e
	}
	for i := range x {
		x[i] /= s
	}
}

// parallelFor runs fn over [0, n) split into contiguous chunks, one per CPU.
func parallelFor(n int, fn func(lo, hi int)) {
	w := min(runtime.GOMAXPROCS(0), n)
	if w <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := range w {
		lo, hi := i*n/w, (i+1)*n/w
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// scratch is a bump allocator for one forward step's temporaries.
type scratch struct {
	slab []float32
	off  int
	over int // bytes requested beyond the slab since the last reset
}

// reset frees everything handed out, growing the slab if it was too small.
func (s *scratch) reset() {
	if s.over > 0 {
		s.slab = make([]float32, len(s.slab)+s.over)
	}
	s.off, s.over = 0, 0
}

// get returns n zeroed float32s valid until the next reset.
func (s *scratch) get(n int) []float32 {
	if s.off+n <= len(s.slab) {
		b := s.slab[s.off : s.off+n : s.off+n]
		s.off += n
		clear(b)
		return b
	}
	s.over += n
	return make([]float32, n)
}
