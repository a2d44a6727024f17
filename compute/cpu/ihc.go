package cpu

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/compute"
)

var _ compute.IndependentMixing = (*Backend)(nil)

// IHCPre implements compute.IndependentMixing: one matmul of the
// flattened channels by Fn for the whole batch, then per token the RMS
// factor, the gates and the weighted sum.
func (b *Backend) IHCPre(x, post, h compute.Tensor, w *compute.HC, p compute.IHCParams) {
	C, D, T := p.HC, p.D, h.Rows
	checkShape("IHCPre h", h, T, C*D)
	checkShape("IHCPre x", x, T, D)
	checkShape("IHCPre post", post, T, C)
	if w.Fn.Rows != 2*C || w.Fn.Cols != C*D || w.Base.Len() != 2*C || w.Scale.Len() != 2 {
		panic(fmt.Sprintf("cpu: IHCPre: fn %d×%d, base %d, scale %d for %d channels of %d", w.Fn.Rows, w.Fn.Cols, w.Base.Len(), w.Scale.Len(), C, D))
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	hv := F32(h)
	mix := b.scratchF32(T * 2 * C)
	b.MatMulF32(mix, hv, T, w.Fn)
	xv, pv := F32(x), F32(post)
	clear(xv)
	scale, base := F32(w.Scale), F32(w.Base)
	for t := range T {
		f := hv[t*C*D : (t+1)*C*D]
		var ss float64
		for _, v := range f {
			ss += float64(v) * float64(v)
		}
		rms := float32(1 / math.Sqrt(float64(float32(ss/float64(len(f))))+float64(p.NormEps)))
		mx := mix[t*2*C : (t+1)*2*C]
		xt := xv[t*D : (t+1)*D]
		for c := range C {
			pre := sigmoid(mx[c]*rms*scale[0]+base[c]) + p.Eps
			pv[t*C+c] = p.Magnitude*sigmoid(mx[C+c]*rms*scale[1]+base[C+c]) + p.Eps
			axpy(xt, pre, f[c*D:(c+1)*D])
		}
	}
}

// IHCPost implements compute.IndependentMixing.
func (b *Backend) IHCPost(h, y, post compute.Tensor, p compute.IHCParams) {
	C, D, T := p.HC, p.D, h.Rows
	checkShape("IHCPost h", h, T, C*D)
	checkShape("IHCPost y", y, T, D)
	checkShape("IHCPost post", post, T, C)
	hv, yv, pv := F32(h), F32(y), F32(post)
	for t := range T {
		yt := yv[t*D : (t+1)*D]
		for c := range C {
			axpy(hv[(t*C+c)*D:(t*C+c+1)*D], pv[t*C+c], yt)
		}
	}
}
