package qwen35

import (
	"fmt"
	"runtime"
	"sync"
)

// DeltaShape gives the sizes of a gated delta rule over one sequence: T
// tokens from position Pos, Hk query/key heads of width Dk, Hv value heads
// of width Dv (a multiple of Hk: value head h reads key head h/(Hv/Hk)).
type DeltaShape struct {
	T, Pos, Hk, Hv, Dk, Dv int
}

func (s DeltaShape) check(name string, o, S, q, k, v, g, beta []float32) {
	if s.T < 0 || s.Pos < 0 || s.Hk <= 0 || s.Hv%s.Hk != 0 || s.Dk <= 0 || s.Dv <= 0 ||
		len(q) < s.T*s.Hk*s.Dk || len(k) < s.T*s.Hk*s.Dk || len(v) < s.T*s.Hv*s.Dv ||
		len(g) < s.T*s.Hv || len(beta) < s.T*s.Hv || len(o) < s.T*s.Hv*s.Dv || len(S) != s.Hv*s.Dk*s.Dv {
		panic(fmt.Sprintf("qwen35: %s: shape %+v with q %d, k %d, v %d, g %d, beta %d, o %d, S %d",
			name, s, len(q), len(k), len(v), len(g), len(beta), len(o), len(S)))
	}
}

// GatedDeltaRule is the gated delta rule of spec §4 computed token by
// token (the reference's recurrent form), continuing from the state S.
//
// q and k are [T, Hk, Dk], already L2-normalised (q also scaled by
// Dk^-1/2); v is [T, Hv, Dv]; g (log decay, ≤ 0) and beta are [T, Hv]; S is
// [Hv, Dk, Dv]; the output o is [T, Hv, Dv]. For each token and value head,
// in float32:
//
//	S ← exp(g)·S;  S ← S + k ⊗ β(v − Sᵀk);  o = Sᵀq
//
// Heads run in parallel.
func GatedDeltaRule(o, S, q, k, v, g, beta []float32, sh DeltaShape) {
	sh.check("GatedDeltaRule", o, S, q, k, v, g, beta)
	T, Hk, Hv, dk, dv := sh.T, sh.Hk, sh.Hv, sh.Dk, sh.Dv
	group := Hv / Hk
	forHeads(Hv, func(h0, h1 int) {
		mem := make([]float32, 2*dv)
		for h := h0; h < h1; h++ {
			Sh := S[h*dk*dv : (h+1)*dk*dv]
			kh := h / group
			for t := range T {
				qt := q[(t*Hk+kh)*dk : (t*Hk+kh+1)*dk]
				kt := k[(t*Hk+kh)*dk : (t*Hk+kh+1)*dk]
				vt := v[(t*Hv+h)*dv : (t*Hv+h+1)*dv]
				ot := o[(t*Hv+h)*dv : (t*Hv+h+1)*dv]
				deltaStep(ot, Sh, qt, kt, vt, mem, expf(g[t*Hv+h]), beta[t*Hv+h])
			}
		}
	})
}

// deltaStep advances one head's state S [dk, dv] by one token of decay d =
// exp(g) and writes its output o [dv]; mem is [2·dv] scratch.
//
// It reads S twice and writes it once. The first pass reads the old state
// for p = Sᵀk and r = Sᵀq; then, with the decayed state dS,
//
//	δ = β(v − d·p);   S ← dS + k ⊗ δ;   o = (dS + k ⊗ δ)ᵀ q = d·r + (k·q) δ
//
// the same quantities as the reference's order (decay, read, update,
// read), up to float32 rounding.
func deltaStep(o, S, q, k, v, mem []float32, d, beta float32) {
	dv := len(v)
	p, r := mem[:dv], mem[dv:2*dv]
	clear(p)
	clear(r)
	for i := range k {
		readRow(p, r, S[i*dv:(i+1)*dv], k[i], q[i])
	}
	kq := dot(k, q)
	for j := range p {
		delta := (v[j] - d*p[j]) * beta
		p[j] = delta
		o[j] = d*r[j] + kq*delta
	}
	for i, ki := range k {
		updateRow(S[i*dv:(i+1)*dv], d, ki, p)
	}
}

// readRow accumulates p += a·s and r += b·s (p and r as long as s).
func readRow(p, r, s []float32, a, b float32) {
	for len(s) >= 4 && len(p) >= 4 && len(r) >= 4 {
		s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
		p[0] += a * s0
		p[1] += a * s1
		p[2] += a * s2
		p[3] += a * s3
		r[0] += b * s0
		r[1] += b * s1
		r[2] += b * s2
		r[3] += b * s3
		s, p, r = s[4:], p[4:], r[4:]
	}
	for j := range s {
		p[j] += a * s[j]
		r[j] += b * s[j]
	}
}

// updateRow computes s = d·s + a·x (x as long as s).
func updateRow(s []float32, d, a float32, x []float32) {
	for len(s) >= 4 && len(x) >= 4 {
		s[0] = d*s[0] + a*x[0]
		s[1] = d*s[1] + a*x[1]
		s[2] = d*s[2] + a*x[2]
		s[3] = d*s[3] + a*x[3]
		s, x = s[4:], x[4:]
	}
	for j := range s {
		s[j] = d*s[j] + a*x[j]
	}
}

// forHeads runs fn over [0, n) split into contiguous ranges, one per CPU.
func forHeads(n int, fn func(lo, hi int)) {
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
