package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

// deltaShape is a delta rule's sizes, checked against its tensors.
type deltaShape struct {
	T, Hk, Hv, Dk, Dv int
	group             int // value heads per key head
	kd, vd, conv      int // Hk·Dk, Hv·Dv, the QKV row width
}

func deltaShapeOf(op string, a *compute.DeltaArgs) deltaShape {
	s := deltaShape{T: a.QKV.Rows, Hk: a.Hk, Hv: a.Hv, Dk: a.Dk, Dv: a.Dv}
	if s.Hk <= 0 || s.Hv <= 0 || s.Hv%s.Hk != 0 || s.Dk <= 0 || s.Dv <= 0 {
		panic(fmt.Sprintf("cpu: %s: %d key heads, %d value heads of %d×%d", op, s.Hk, s.Hv, s.Dk, s.Dv))
	}
	s.group, s.kd, s.vd = s.Hv/s.Hk, s.Hk*s.Dk, s.Hv*s.Dv
	s.conv = 2*s.kd + s.vd
	checkShape(op+" QKV", a.QKV, s.T, s.conv)
	checkShape(op+" Out", a.Out, s.T, s.vd)
	checkShape(op+" A", a.A, s.T, s.Hv)
	checkShape(op+" B", a.B, s.T, s.Hv)
	checkShape(op+" NegA", a.NegA, 1, s.Hv)
	checkShape(op+" DtBias", a.DtBias, 1, s.Hv)
	if a.State.SlotBytes != 4*s.Dk*s.Dv || a.State.Format != compute.SlotF32 {
		panic(fmt.Sprintf("cpu: %s: state slots of %d bytes (%v), want %d f32", op, a.State.SlotBytes, a.State.Format, 4*s.Dk*s.Dv))
	}
	return s
}

// deltaToken is one token's inputs to one value head: its normalised query
// and key, value, log decay g, decay e^g and write strength β.
type deltaToken struct {
	q, k, v        []float32
	g, decay, beta float32
}

// deltaInputs computes token t's inputs for value head h from the layer's
// tensors, q and k normalised into qn and kn (Dk each).
func deltaInputs(sh *deltaShape, qkv, A, B, negA, dtBias []float32, t, h int, qn, kn []float32) deltaToken {
	kh := h / sh.group
	row := qkv[t*sh.conv : (t+1)*sh.conv]
	l2Norm(qn, row[kh*sh.Dk:(kh+1)*sh.Dk], float32(1/math.Sqrt(float64(sh.Dk))))
	l2Norm(kn, row[sh.kd+kh*sh.Dk:sh.kd+(kh+1)*sh.Dk], 1)
	g := negA[h] * float32(softplus(float64(A[t*sh.Hv+h]+dtBias[h])))
	return deltaToken{
		q: qn, k: kn, v: row[2*sh.kd+h*sh.Dv : 2*sh.kd+(h+1)*sh.Dv],
		g: g, decay: float32(math.Exp(float64(g))), beta: sigmoid(B[t*sh.Hv+h]),
	}
}

// l2Norm writes x·(Σx² + 1e-6)^(-1/2)·s into dst: the sum of squares in
// float64, the factor rounded to float32 once.
func l2Norm(dst, x []float32, s float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := float32(1 / math.Sqrt(float64(float32(ss))+1e-6))
	for i, v := range x {
		dst[i] = v * inv * s
	}
}

// DeltaRule implements compute.Recurrent. Work items are (span, value
// head) pairs: each runs its span's tokens in order through its state slot.
func (b *Backend) DeltaRule(a *compute.DeltaArgs, sp compute.Spans) {
	sh := deltaShapeOf("DeltaRule", a)
	qkv, A, B, negA, dtBias, out := F32(a.QKV), F32(a.A), F32(a.B), F32(a.NegA), F32(a.DtBias), F32(a.Out)
	spans := spansOf(sp)
	bufs := newPerWorker(b.s, func() *[]float32 { v := make([]float32, 2*sh.Dk+2*sh.Dv); return &v })
	b.s.forItems(len(spans)*sh.Hv, func(worker, it int) {
		si, h := it/sh.Hv, it%sh.Hv
		s := spans[si]
		S := spanSlots(a.State, si).slot(h)
		buf := *bufs.get(worker)
		qn, kn, mem := buf[:sh.Dk], buf[sh.Dk:2*sh.Dk], buf[2*sh.Dk:]
		for t := s.start; t < s.start+s.n; t++ {
			in := deltaInputs(&sh, qkv, A, B, negA, dtBias, t, h, qn, kn)
			deltaStep(out[t*sh.vd+h*sh.Dv:t*sh.vd+(h+1)*sh.Dv], S, in, mem)
		}
	})
}

// deltaStep advances one head's state S [Dk, Dv] by one token and writes
// its output o [Dv]; mem is [2·Dv] scratch.
//
// It reads S twice and writes it once. The first pass reads the old state
// for p = Sᵀk and r = Sᵀq; then, with d the decay and dS the decayed state,
//
//	δ = β(v − d·p);   S ← dS + k ⊗ δ;   o = (dS + k ⊗ δ)ᵀ q = d·r + (k·q) δ
//
// the same quantities as the reference's order (decay, read, update,
// read), up to float32 rounding.
func deltaStep(o, S []float32, in deltaToken, mem []float32) {
	dv := len(in.v)
	p, r := mem[:dv], mem[dv:2*dv]
	clear(p)
	clear(r)
	for i := range in.k {
		readRow(p, r, S[i*dv:(i+1)*dv], in.k[i], in.q[i])
	}
	kq := dot(in.k, in.q)
	d := in.decay
	for j := range p {
		delta := (in.v[j] - d*p[j]) * in.beta
		p[j] = delta
		o[j] = d*r[j] + kq*delta
	}
	for i, ki := range in.k {
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
