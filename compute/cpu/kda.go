package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

var _ compute.KDA = (*Backend)(nil)

// KDARule implements compute.KDA. Work items are (span, head) pairs: each
// runs its span's tokens in order through its state slot.
//
// One token reads S once and writes it once: with d_i = e^{g_i} the decay
// of key channel i, the decayed state's products are Σ_i (d_i k_i) S_i and
// Σ_i (d_i q_i) S_i, so
//
//	p = Σ_i d_i k_i S_i;  δ = β(v − p);  S_i ← d_i S_i + k_i δ;  o = Σ_i d_i q_i S_i + (k·q) δ
//
// the reference's quantities (decay, read, update, read) up to float32
// rounding.
func (b *Backend) KDARule(a *compute.KDAArgs, sp compute.Spans) {
	H, Dk, Dv := a.H, a.Dk, a.Dv
	if H <= 0 || Dk <= 0 || Dv <= 0 {
		panic(fmt.Sprintf("cpu: KDARule: %d heads of %d×%d", H, Dk, Dv))
	}
	T := a.QKV.Rows
	kd, vd := H*Dk, H*Dv
	W := 2*kd + vd
	checkShape("KDARule QKV", a.QKV, T, W)
	checkShape("KDARule Out", a.Out, T, vd)
	checkShape("KDARule A", a.A, T, kd)
	checkShape("KDARule B", a.B, T, H)
	checkShape("KDARule NegA", a.NegA, 1, H)
	checkShape("KDARule DtBias", a.DtBias, 1, kd)
	if a.State.SlotBytes != 4*Dk*Dv || a.State.Format != compute.SlotF32 {
		panic(fmt.Sprintf("cpu: KDARule: state slots of %d bytes (%v), want %d f32", a.State.SlotBytes, a.State.Format, 4*Dk*Dv))
	}
	qkv, A, B, negA, dtBias, out := F32(a.QKV), F32(a.A), F32(a.B), F32(a.NegA), F32(a.DtBias), F32(a.Out)
	spans := spansOf(sp)
	bufs := newPerWorker(b.s, func() *[]float32 { v := make([]float32, 5*Dk+2*Dv); return &v })
	b.s.forItems(len(spans)*H, func(worker, it int) {
		si, h := it/H, it%H
		s := spans[si]
		S := spanSlots(a.State, si).slot(h)
		buf := *bufs.get(worker)
		qn, kn, d, dk, dq := buf[:Dk], buf[Dk:2*Dk], buf[2*Dk:3*Dk], buf[3*Dk:4*Dk], buf[4*Dk:5*Dk]
		p, r := buf[5*Dk:5*Dk+Dv], buf[5*Dk+Dv:]
		for t := s.start; t < s.start+s.n; t++ {
			row := qkv[t*W : (t+1)*W]
			l2Norm(qn, row[h*Dk:(h+1)*Dk], float32(1/math.Sqrt(float64(Dk))))
			l2Norm(kn, row[kd+h*Dk:kd+(h+1)*Dk], 1)
			v := row[2*kd+h*Dv : 2*kd+(h+1)*Dv]
			beta := sigmoid(B[t*H+h])
			for i := range Dk {
				c := h*Dk + i
				g := negA[h] * float32(softplus(float64(A[t*kd+c]+dtBias[c])))
				d[i] = float32(math.Exp(float64(g)))
				dk[i], dq[i] = d[i]*kn[i], d[i]*qn[i]
			}
			clear(p)
			clear(r)
			for i := range Dk {
				readRow(p, r, S[i*Dv:(i+1)*Dv], dk[i], dq[i])
			}
			kq := dot(kn, qn)
			o := out[t*vd+h*Dv : t*vd+(h+1)*Dv]
			for j := range p {
				delta := (v[j] - p[j]) * beta
				p[j] = delta
				o[j] = r[j] + kq*delta
			}
			for i := range Dk {
				updateRow(S[i*Dv:(i+1)*Dv], d[i], kn[i], p)
			}
		}
	})
}
