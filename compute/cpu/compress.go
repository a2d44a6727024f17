package cpu

import (
	"math"

	"github.com/strata-inference/strata/compute"
)

// Compress implements compute.Attention (DeepSeek-V4 spec §3,
// "Compressor"): window w of a span is the tokens [w·rate, (w+1)·rate),
// and with overlap also the first halves of the previous window's tokens;
// its entry is, channel by channel, the softmax over the window's scores of
// the values, then RMS-normed and rotated at position w·rate.
func (b *Backend) Compress(a *compute.CompressArgs, sp compute.Spans) {
	width, rate := a.Width, a.Rate
	cw, ringSlots := width, rate
	if a.Overlap {
		cw, ringSlots = 2*width, 2*rate
	}
	T := a.A.Rows
	checkShape("Compress A", a.A, T, cw)
	checkShape("Compress Z", a.Z, T, cw)
	av, zv, ape := F32(a.A), F32(a.Z), F32(a.Ape)
	spans := b.s.spanList(sp)
	for _, s := range spans {
		for i := range s.n {
			t, p := s.start+i, s.pos0+i
			axpy(zv[t*cw:(t+1)*cw], 1, ape[(p%rate)*cw:(p%rate+1)*cw])
		}
	}
	mark := b.ScratchMark()
	defer b.ResetScratch(mark)
	mx, num, den, entry := b.scratchF32(width), b.scratchF32(width), b.scratchF32(width), b.scratchF32(width)
	var norm []float32
	if a.Norm.Valid() {
		norm = F32(a.Norm)
	}
	inv := F32(a.InvFreq)
	for si, s := range spans {
		p0, n := s.pos0, s.n
		ents := spanSlots(a.Entries, si)
		ring := spanSlots(a.Ring, si)
		token := func(p int) ([]float32, []float32) {
			if p >= p0 {
				r := s.start + p - p0
				return av[r*cw : (r+1)*cw], zv[r*cw : (r+1)*cw]
			}
			sl := ring.slot(p % ringSlots)
			return sl[:cw], sl[cw:]
		}
		// Windows w closing inside the span: p0 <= (w+1)·rate-1 < p0+n.
		for w := (p0+rate)/rate - 1; w < (p0+n)/rate; w++ {
			for i := range mx {
				mx[i] = float32(math.Inf(-1))
			}
			clear(num)
			clear(den)
			// Each slot contributes value half av[off:] with score half zv[off:].
			visit := func(f func(av, zv []float32)) {
				if a.Overlap && w > 0 {
					for p := (w - 1) * rate; p < w*rate; p++ {
						av, zv := token(p)
						f(av[:width], zv[:width])
					}
				}
				off := 0
				if a.Overlap {
					off = width
				}
				for p := w * rate; p < (w+1)*rate; p++ {
					av, zv := token(p)
					f(av[off:off+width], zv[off:off+width])
				}
			}
			visit(func(_, zv []float32) {
				for i, v := range zv {
					mx[i] = max(mx[i], v)
				}
			})
			visit(func(av, zv []float32) {
				for i, v := range zv {
					e := float32(math.Exp(float64(v - mx[i])))
					den[i] += e
					num[i] += e * av[i]
				}
			})
			out := entry
			for i := range out {
				out[i] = num[i] / den[i]
			}
			b.RMSNormF32(out, out, norm, 1, width, a.Eps)
			b.s.ropePos[0] = int32(w * rate)
			b.RoPEF32(out, 1, width, b.s.ropePos[:], inv, false)
			ents.write(w, out)
		}
		for p := max(p0, p0+n-ringSlots); p < p0+n; p++ {
			av, zv := token(p)
			sl := ring.slot(p % ringSlots)
			copy(sl[:cw], av)
			copy(sl[cw:], zv)
		}
	}
}
