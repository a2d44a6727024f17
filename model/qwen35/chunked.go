package qwen35

import (
	"fmt"
	"math"
)

// DeltaChunk is the chunk length of the chunked delta rule, as in the
// reference (transformers' torch_chunk_gated_delta_rule, chunk_size 64).
const DeltaChunk = 64

// GatedDeltaRuleChunked computes what GatedDeltaRule computes (same
// arguments, same state and output layouts) in the reference's chunked
// form, used for prompts and multi-token feeds (spec §4): the T tokens are
// cut into chunks of chunk tokens, and for each chunk and value head, with
// Γ the in-chunk cumulative sum of g:
//
//	A_ij = β_i (k_i·k_j) e^{Γ_i−Γ_j} for j < i;   T = (I + A)⁻¹ (forward substitution)
//	U = T(β v);   W = T(β k e^Γ);   v' = U − W S
//	o = (q e^Γ) S + M v',   M_ij = (q_i·k_j) e^{Γ_i−Γ_j} for j ≤ i
//	S ← e^{Γ_last} S + Σ_j (k_j e^{Γ_last−Γ_j}) ⊗ v'_j
//
// in float32, each product summed before it is combined, in the order the
// reference combines them, except Γ: the reference's float32 cumulative sum
// reaches magnitudes where its rounding error (about 1e-5 at Γ ≈ -200, a
// fast-decaying head's 64 tokens) becomes the relative error of every
// e^{Γ_i−Γ_j}, the largest error of the chunked form; here Γ is summed and
// differenced in float64 and each exponential rounded to float32 once. The
// result equals the recurrence up to float32 rounding, not bit for bit.
// Heads run in parallel.
//
// Chunks are aligned to sequence positions: they end at multiples of chunk
// counted from position 0, sh.Pos being the first token's position. A feed
// from position 0 is chunked exactly as the reference chunks it (which
// zero-pads the last chunk; that changes nothing). A later feed's first
// chunk is shorter than the reference's (which counts chunks from the
// feed's first token), so that any split of a sequence into feeds at
// multiples of chunk gives the same bits as one feed.
func GatedDeltaRuleChunked(o, S, q, k, v, g, beta []float32, sh DeltaShape, chunk int) {
	sh.check("GatedDeltaRuleChunked", o, S, q, k, v, g, beta)
	if chunk <= 0 {
		panic(fmt.Sprintf("qwen35: GatedDeltaRuleChunked: chunk %d", chunk))
	}
	T, Hk, Hv, dk, dv := sh.T, sh.Hk, sh.Hv, sh.Dk, sh.Dv
	group := Hv / Hk
	C := min(chunk, max(T, 1))
	first := min(chunk-sh.Pos%chunk, T) // the first chunk ends at a multiple of chunk
	forHeads(Hv, func(h0, h1 int) {
		w := newChunkWork(C, dk, dv)
		for h := h0; h < h1; h++ {
			Sh := S[h*dk*dv : (h+1)*dk*dv]
			kh := h / group
			for c0, n := 0, first; c0 < T; c0, n = c0+n, min(chunk, T-c0-n) {
				// Each operand starts at the chunk's first token of this
				// head; rows of one operand are a token apart.
				w.chunk(n, Sh, chunkRows{
					q: q[(c0*Hk+kh)*dk:], k: k[(c0*Hk+kh)*dk:], qk: Hk * dk,
					v: v[(c0*Hv+h)*dv:], o: o[(c0*Hv+h)*dv:], vo: Hv * dv,
					g: g[c0*Hv+h:], beta: beta[c0*Hv+h:], gb: Hv,
				})
			}
		}
	})
}

// chunkRows locates one head's rows of one chunk: row i of q starts at
// q[i·qk], of v and o at i·vo, and g and beta at i·gb.
type chunkRows struct {
	q, k, v, o, g, beta []float32
	qk, vo, gb          int
}

// chunkWork is one worker's scratch for the chunked delta rule.
type chunkWork struct {
	gam     []float64 // [C] cumulative log decay
	A, M    []float32 // [C, C]
	U       []float32 // [C, dv]: T(βv), then v'
	W, kb   []float32 // [C, dk]: T(βk e^Γ); βk
	kd, tmp []float32 // [dk], [dv]
	upd     []float32 // [dk, dv]
}

func newChunkWork(C, dk, dv int) *chunkWork {
	return &chunkWork{
		gam: make([]float64, C),
		A:   make([]float32, C*C),
		M:   make([]float32, C*C),
		U:   make([]float32, C*dv),
		W:   make([]float32, C*dk),
		kb:  make([]float32, C*dk),
		kd:  make([]float32, dk),
		tmp: make([]float32, dv),
		upd: make([]float32, dk*dv),
	}
}

// chunk runs one chunk of n tokens of one value head against its state S
// [dk, dv], writing the n outputs.
func (w *chunkWork) chunk(n int, S []float32, r chunkRows) {
	dk := len(w.kd)
	dv := len(w.tmp)
	qr := func(i int) []float32 { return r.q[i*r.qk : i*r.qk+dk] }
	kr := func(i int) []float32 { return r.k[i*r.qk : i*r.qk+dk] }
	vr := func(i int) []float32 { return r.v[i*r.vo : i*r.vo+dv] }
	or := func(i int) []float32 { return r.o[i*r.vo : i*r.vo+dv] }
	gr := func(i int) float32 { return r.g[i*r.gb] }
	br := func(i int) float32 { return r.beta[i*r.gb] }
	gam, A, M, U, W, kb := w.gam[:n], w.A, w.M, w.U, w.W, w.kb
	var acc float64
	for i := range n {
		acc += float64(gr(i))
		gam[i] = acc
	}
	for i := range n {
		b, eg := br(i), float32(math.Exp(gam[i]))
		ki, vi := kr(i), vr(i)
		kbi, Wi, Ui := kb[i*dk:(i+1)*dk], W[i*dk:(i+1)*dk], U[i*dv:(i+1)*dv]
		for a := range dk {
			kbi[a] = ki[a] * b
			Wi[a] = kbi[a] * eg
		}
		for j := range dv {
			Ui[j] = vi[j] * b
		}
	}
	for i := range n {
		kbi, qi := kb[i*dk:(i+1)*dk], qr(i)
		for j := 0; j <= i; j++ {
			e := float32(math.Exp(gam[i] - gam[j]))
			kj := kr(j)
			if j < i {
				A[i*n+j] = dot(kbi, kj) * e
			}
			M[i*n+j] = dot(qi, kj) * e
		}
	}
	// Forward substitution: X_i = B_i − Σ_{j<i} A_ij X_j solves (I + A) X = B.
	for i := 1; i < n; i++ {
		Ui, Wi := U[i*dv:(i+1)*dv], W[i*dk:(i+1)*dk]
		for j := range i {
			a := -A[i*n+j]
			axpy(Ui, a, U[j*dv:(j+1)*dv])
			axpy(Wi, a, W[j*dk:(j+1)*dk])
		}
	}
	// v' = U − W S.
	for i := range n {
		Ui, Wi := U[i*dv:(i+1)*dv], W[i*dk:(i+1)*dk]
		clear(w.tmp)
		for a := range dk {
			axpy(w.tmp, Wi[a], S[a*dv:(a+1)*dv])
		}
		for j := range Ui {
			Ui[j] -= w.tmp[j]
		}
	}
	// o = (q e^Γ) S + M v'.
	for i := range n {
		oi, qi, eg := or(i), qr(i), float32(math.Exp(gam[i]))
		clear(oi)
		for a := range dk {
			axpy(oi, qi[a]*eg, S[a*dv:(a+1)*dv])
		}
		clear(w.tmp)
		for j := 0; j <= i; j++ {
			axpy(w.tmp, M[i*n+j], U[j*dv:(j+1)*dv])
		}
		for j := range oi {
			oi[j] += w.tmp[j]
		}
	}
	// S ← e^{Γ_last} S + Σ_j (k_j e^{Γ_last−Γ_j}) ⊗ v'_j.
	last := gam[n-1]
	clear(w.upd)
	for j := range n {
		kj, e := kr(j), float32(math.Exp(last-gam[j]))
		for a := range dk {
			w.kd[a] = kj[a] * e
		}
		Uj := U[j*dv : (j+1)*dv]
		for a := range dk {
			axpy(w.upd[a*dv:(a+1)*dv], w.kd[a], Uj)
		}
	}
	dl := float32(math.Exp(last))
	for x := range S {
		S[x] = S[x]*dl + w.upd[x]
	}
}
