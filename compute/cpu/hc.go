package cpu

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// HCPre implements compute.Mixing: flatten and RMS-normalize each token's
// streams, mix them with Fn, and turn the mix into pre (sigmoid + eps),
// post (2·sigmoid) and comb (Sinkhorn) weights.
func (b *Backend) HCPre(x, post, comb, h compute.Tensor, w *compute.HC, p compute.HCParams) {
	hc, D, T := p.HC, p.D, h.Rows
	nMix := (2 + hc) * hc
	checkShape("HCPre h", h, T, hc*D)
	checkShape("HCPre x", x, T, D)
	checkShape("HCPre post", post, T, hc)
	checkShape("HCPre comb", comb, T, hc*hc)
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	hv := F32(h)
	flat := b.scratchF32(T * hc * D)
	b.RMSNormF32(flat, hv, nil, T, hc*D, p.NormEps)
	mix := b.scratchF32(T * nMix)
	b.MatMulF32(mix, flat, T, w.Fn)

	xv, pv, cv := F32(x), F32(post), F32(comb)
	clear(xv)
	scale, base := F32(w.Scale), F32(w.Base)
	var preBuf [16]float32
	pre := preBuf[:hc]
	if hc > len(preBuf) {
		pre = make([]float32, hc)
	}
	for t := range T {
		mx := mix[t*nMix : (t+1)*nMix]
		for j := range hc {
			pre[j] = sigmoid(mx[j]*scale[0]+base[j]) + p.Eps
			pv[t*hc+j] = 2 * sigmoid(mx[hc+j]*scale[1]+base[hc+j])
		}
		c := cv[t*hc*hc : (t+1)*hc*hc]
		for i := range c {
			c[i] = mx[2*hc+i]*scale[2] + base[2*hc+i]
		}
		sinkhorn(c, hc, p.SinkhornIters, p.Eps)
		xt := xv[t*D : (t+1)*D]
		for j := range hc {
			axpy(xt, pre[j], hv[(t*hc+j)*D:(t*hc+j+1)*D])
		}
	}
}

// sinkhorn turns the hc×hc logits c (row j = input stream, column k = output
// stream) into a doubly stochastic matrix: softmax over each row plus eps,
// normalise columns, then iters-1 rounds of rows then columns, each sum + eps.
func sinkhorn(c []float32, hc, iters int, eps float32) {
	for j := range hc {
		row := c[j*hc : (j+1)*hc]
		softmax32(row)
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

// HCPost implements compute.Mixing.
func (b *Backend) HCPost(h, y, post, comb compute.Tensor, p compute.HCParams) {
	hc, D, T := p.HC, p.D, h.Rows
	checkShape("HCPost h", h, T, hc*D)
	checkShape("HCPost y", y, T, D)
	hv, yv, pv, cv := F32(h), F32(y), F32(post), F32(comb)
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	old := b.scratchF32(hc * D)
	for t := range T {
		ht := hv[t*hc*D : (t+1)*hc*D]
		copy(old, ht)
		yt := yv[t*D : (t+1)*D]
		c := cv[t*hc*hc:]
		for k := range hc {
			dst := ht[k*D : (k+1)*D]
			pk := pv[t*hc+k]
			for i := range dst {
				dst[i] = pk * yt[i]
			}
			for j := range hc {
				axpy(dst, c[j*hc+k], old[j*D:(j+1)*D])
			}
		}
	}
}

// HCHead implements compute.Mixing.
func (b *Backend) HCHead(x, h compute.Tensor, w *compute.HC, p compute.HCParams) {
	hc, D, R := p.HC, p.D, h.Rows
	checkShape("HCHead h", h, R, hc*D)
	checkShape("HCHead x", x, R, D)
	if w.Fn.Rows != hc {
		panic(fmt.Sprintf("cpu: HCHead: fn has %d rows for %d streams", w.Fn.Rows, hc))
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	hv := F32(h)
	flat := b.scratchF32(R * hc * D)
	b.RMSNormF32(flat, hv, nil, R, hc*D, p.NormEps)
	mix := b.scratchF32(R * hc)
	b.MatMulF32(mix, flat, R, w.Fn)
	xv, scale, base := F32(x), F32(w.Scale), F32(w.Base)
	clear(xv)
	for i := range R {
		for j := range hc {
			pre := sigmoid(mix[i*hc+j]*scale[0]+base[j]) + p.Eps
			axpy(xv[i*D:(i+1)*D], pre, hv[(i*hc+j)*D:(i*hc+j+1)*D])
		}
	}
}
