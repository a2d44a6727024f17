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
	gam    []float64 // [C] cumulative log decay
	A, M   []float32 // [C, C]
	U      []float32 // [C, dv]: T(βv), then v'
	W, kb  []float32 // [C, dk]: T(βk e^Γ); βk
	qe     []float32 // [C, dk]: q e^Γ
	kT, kd []float32 // [dk, C]: kᵀ; (k e^{Γ_last−Γ})ᵀ
	tmp    []float32 // [C, dv]
	upd    []float32 // [dk, dv]
	panel  []float32 // matAcc's
	dk, dv int
}

func newChunkWork(C, dk, dv int) *chunkWork {
	return &chunkWork{
		gam:   make([]float64, C),
		A:     make([]float32, C*C),
		M:     make([]float32, C*C),
		U:     make([]float32, C*dv),
		W:     make([]float32, C*dk),
		kb:    make([]float32, C*dk),
		qe:    make([]float32, C*dk),
		kT:    make([]float32, dk*C),
		kd:    make([]float32, dk*C),
		tmp:   make([]float32, C*dv),
		upd:   make([]float32, dk*dv),
		panel: make([]float32, 4*max(dk, C)),
		dk:    dk, dv: dv,
	}
}

// chunk runs one chunk of n tokens of one value head against its state S
// [dk, dv], writing the n outputs. The products run through matAcc.
func (w *chunkWork) chunk(n int, S []float32, r chunkRows) {
	dk, dv := w.dk, w.dv
	gam, A, M, U, W, kb, qe := w.gam[:n], w.A[:n*n], w.M[:n*n], w.U[:n*dv], w.W[:n*dk], w.kb[:n*dk], w.qe[:n*dk]
	var acc float64
	for i := range n {
		acc += float64(r.g[i*r.gb])
		gam[i] = acc
	}
	for i := range n {
		b, eg := r.beta[i*r.gb], float32(math.Exp(gam[i]))
		ki, qi, vi := r.k[i*r.qk:i*r.qk+dk], r.q[i*r.qk:i*r.qk+dk], r.v[i*r.vo:i*r.vo+dv]
		kbi, Wi, Ui, qei := kb[i*dk:(i+1)*dk], W[i*dk:(i+1)*dk], U[i*dv:(i+1)*dv], qe[i*dk:(i+1)*dk]
		for a := range dk {
			kbi[a] = ki[a] * b
			Wi[a] = kbi[a] * eg
			qei[a] = qi[a] * eg
			w.kT[a*n+i] = ki[a]
		}
		for j := range dv {
			Ui[j] = vi[j] * b
		}
	}
	// A = (βk)·kᵀ and M = q·kᵀ, then the decays e^{Γ_i−Γ_j} and the masks
	// (A strictly lower, M lower).
	clear(A)
	clear(M)
	matAcc(A, n, kb, dk, w.kT, n, n, dk, n, w.panel)
	matAcc(M, n, r.q, r.qk, w.kT, n, n, dk, n, w.panel)
	for i := range n {
		for j := range n {
			if j > i {
				A[i*n+j], M[i*n+j] = 0, 0
				continue
			}
			e := float32(math.Exp(gam[i] - gam[j]))
			M[i*n+j] *= e
			if j < i {
				A[i*n+j] *= e
			} else {
				A[i*n+j] = 0
			}
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
	tmp := w.tmp[:n*dv]
	clear(tmp)
	matAcc(tmp, dv, W, dk, S, dv, n, dk, dv, w.panel)
	for x := range U {
		U[x] -= tmp[x]
	}
	// o = (q e^Γ) S + M v'.
	for i := range n {
		clear(r.o[i*r.vo : i*r.vo+dv])
	}
	matAcc(r.o, r.vo, qe, dk, S, dv, n, dk, dv, w.panel)
	clear(tmp)
	matAcc(tmp, dv, M, n, U, dv, n, n, dv, w.panel)
	for i := range n {
		axpy(r.o[i*r.vo:i*r.vo+dv], 1, tmp[i*dv:(i+1)*dv])
	}
	// S ← e^{Γ_last} S + Σ_j (k_j e^{Γ_last−Γ_j}) ⊗ v'_j.
	last := gam[n-1]
	for j := range n {
		e := float32(math.Exp(last - gam[j]))
		for a := range dk {
			w.kd[a*n+j] = w.kT[a*n+j] * e
		}
	}
	clear(w.upd)
	matAcc(w.upd, dv, w.kd, n, U, dv, dk, n, dv, w.panel)
	dl := float32(math.Exp(last))
	for x := range S {
		S[x] = S[x]*dl + w.upd[x]
	}
}
