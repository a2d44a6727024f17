package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// DeltaRuleChunked implements compute.Recurrent in the chunked form of
// transformers' torch_chunk_gated_delta_rule (chunk 64 there), each
// product summed before it is combined, in the order the reference
// combines them, except Γ: the reference's float32 cumulative sum reaches
// magnitudes where its rounding error (about 1e-5 at Γ ≈ -200, a
// fast-decaying head's 64 tokens) becomes the relative error of every
// e^{Γ_i−Γ_j}, the largest error of the chunked form; here Γ is summed and
// differenced in float64 and each exponential rounded to float32 once.
//
// Chunks end at multiples of chunk counted from position 0. A feed from
// position 0 is chunked exactly as the reference chunks it (which
// zero-pads the last chunk; that changes nothing). A later feed's first
// chunk is shorter than the reference's (which counts chunks from the
// feed's first token), so that any split of a sequence into feeds at
// multiples of chunk gives the same bits as one feed. Work items are
// (span, value head) pairs.
func (b *Backend) DeltaRuleChunked(a *compute.DeltaArgs, sp compute.Spans, chunk int) {
	if chunk <= 0 {
		panic(fmt.Sprintf("cpu: DeltaRuleChunked: chunk %d", chunk))
	}
	sh := deltaShapeOf("DeltaRuleChunked", a)
	qkv, A, B, negA, dtBias, out := F32(a.QKV), F32(a.A), F32(a.B), F32(a.NegA), F32(a.DtBias), F32(a.Out)
	spans := spansOf(sp)
	longest := 1
	for _, s := range spans {
		longest = max(longest, s.n)
	}
	C := min(chunk, longest)
	works := newPerWorker(b.s, func() *chunkWork { return newChunkWork(C, sh.Dk, sh.Dv) })
	b.s.forItems(len(spans)*sh.Hv, func(worker, it int) {
		si, h := it/sh.Hv, it%sh.Hv
		s := spans[si]
		S := spanSlots(a.State, si).slot(h)
		w := works.get(worker)
		first := min(chunk-s.pos0%chunk, s.n) // the first chunk ends at a multiple of chunk
		for c0, n := 0, first; c0 < s.n; c0, n = c0+n, min(chunk, s.n-c0-n) {
			t0 := s.start + c0
			for i := range n {
				in := deltaInputs(&sh, qkv, A, B, negA, dtBias, t0+i, h, w.qn[i*sh.Dk:(i+1)*sh.Dk], w.kn[i*sh.Dk:(i+1)*sh.Dk])
				w.g[i], w.beta[i] = in.g, in.beta
			}
			w.chunk(n, S, chunkRows{
				q: w.qn, k: w.kn, qk: sh.Dk,
				v: qkv[t0*sh.conv+2*sh.kd+h*sh.Dv:], vs: sh.conv,
				o: out[t0*sh.vd+h*sh.Dv:], os: sh.vd,
				g: w.g, beta: w.beta,
			})
		}
	})
}

// chunkRows locates one head's rows of one chunk: row i of q and k starts
// at i·qk, of v at i·vs, of o at i·os; g and beta are one value per row.
type chunkRows struct {
	q, k, v, o, g, beta []float32
	qk, vs, os          int
}

// chunkWork is one worker's scratch for the chunked delta rule.
type chunkWork struct {
	qn, kn  []float32 // [C, dk]: the chunk's normalised queries and keys
	g, beta []float32 // [C]
	gam     []float64 // [C] cumulative log decay
	A, M    []float32 // [C, C]
	U       []float32 // [C, dv]: T(βv), then v'
	W, kb   []float32 // [C, dk]: T(βk e^Γ); βk
	qe      []float32 // [C, dk]: q e^Γ
	kT, kd  []float32 // [dk, C]: kᵀ; (k e^{Γ_last−Γ})ᵀ
	tmp     []float32 // [C, dv]
	upd     []float32 // [dk, dv]
	panel   []float32 // matAcc's
	dk, dv  int
}

func newChunkWork(C, dk, dv int) *chunkWork {
	return &chunkWork{
		qn: make([]float32, C*dk), kn: make([]float32, C*dk),
		g: make([]float32, C), beta: make([]float32, C),
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
		acc += float64(r.g[i])
		gam[i] = acc
	}
	for i := range n {
		b, eg := r.beta[i], float32(math.Exp(gam[i]))
		ki, qi, vi := r.k[i*r.qk:i*r.qk+dk], r.q[i*r.qk:i*r.qk+dk], r.v[i*r.vs:i*r.vs+dv]
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
		clear(r.o[i*r.os : i*r.os+dv])
	}
	matAcc(r.o, r.os, qe, dk, S, dv, n, dk, dv, w.panel)
	clear(tmp)
	matAcc(tmp, dv, M, n, U, dv, n, n, dv, w.panel)
	for i := range n {
		axpy(r.o[i*r.os:i*r.os+dv], 1, tmp[i*dv:(i+1)*dv])
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
