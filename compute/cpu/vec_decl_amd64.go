package cpu

import "unsafe"

// Assembly routines: see vecAsm for their contracts. The Z suffix marks the
// AVX-512 ones (vec_avx512_amd64.s), Y the AVX2 ones (vec_avx2_amd64.s).
// Every one of them ends with VZEROUPPER.

//go:noescape
func dotF32Z(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)

//go:noescape
func dotBF16Z(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)

//go:noescape
func dotF16Z(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)

//go:noescape
func dotFP8Z(acc *[4]lanes, w *[4]unsafe.Pointer, s *byte, x *float32, n, bc int)

//go:noescape
func dotFP4Z(acc *[4]lanes, w *byte, ws int, s *byte, ss int, x *float32, groups int, tab *fp4Tables)

//go:noescape
func decBF16Z(dst *float32, w *byte, n int)

//go:noescape
func decF16Z(dst *float32, w *byte, n int)

//go:noescape
func decFP8Z(dst *float32, w *byte, n int, s int)

//go:noescape
func decFP4Z(dst *float32, w *byte, s *byte, groups int, tab *fp4Tables)

//go:noescape
func nanE4M3Z(p *byte, n int) bool

//go:noescape
func dotF32Y(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)

//go:noescape
func dotBF16Y(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)

//go:noescape
func dotF16Y(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int)

//go:noescape
func dotFP8Y(acc *[4]lanes, w *[4]unsafe.Pointer, s *byte, x *float32, n, bc int)

//go:noescape
func dotFP4Y(acc *[4]lanes, w *byte, ws int, s *byte, ss int, x *float32, groups int, tab *fp4Tables)

//go:noescape
func decBF16Y(dst *float32, w *byte, n int)

//go:noescape
func decF16Y(dst *float32, w *byte, n int)

//go:noescape
func decFP8Y(dst *float32, w *byte, n int, s int)

//go:noescape
func decFP4Y(dst *float32, w *byte, s *byte, groups int, tab *fp4Tables)

//go:noescape
func gemm2Y(acc unsafe.Pointer, w unsafe.Pointer, ws int, xa, xb unsafe.Pointer, n int)

// gemmY adds row i of the four rows at w (stride ws float32s) times token t
// of xs to acc[4t+i], over n columns, in four half passes of gemm2Y: tokens
// 0 and 1, then 2 and 3, each for lanes 0-7, then 8-15.
func gemmY(acc *[16]lanes, w *float32, ws int, xs *[4]unsafe.Pointer, n int) {
	a, p := unsafe.Pointer(acc), unsafe.Pointer(w)
	for pair := range 2 {
		for h := uintptr(0); h < 64; h += 32 {
			gemm2Y(unsafe.Add(a, uintptr(pair)*512+h), unsafe.Add(p, h), ws,
				unsafe.Add(xs[2*pair], h), unsafe.Add(xs[2*pair+1], h), n-int(h/4))
		}
	}
}

//go:noescape
func nanE4M3Y(p *byte, n int) bool

//go:noescape
func gemm83Z(acc *[24]lanes, w *float32, ws int, xs *[4]unsafe.Pointer, n int)

// peakFMAZ and peakFMAY are the benchmarks' FMA throughput probes
// (peak_amd64.s): n iterations of 24 512-bit, or 12 256-bit, FMAs.
func peakFMAZ(n int)
func peakFMAY(n int)

// Attention and indexer routines (attn_amd64.s); see vecAsm.accRows4,
// vecAsm.accRow1 and vecAsm.idxDots.

//go:noescape
func accRows4Z(y *float32, w *[4]float32, rows *[4]unsafe.Pointer, n int)

//go:noescape
func accRow1Z(y *float32, w *float32, row unsafe.Pointer, n int)

//go:noescape
func accRows4Y(y *float32, w *[4]float32, rows *[4]unsafe.Pointer, n int)

//go:noescape
func accRow1Y(y *float32, w *float32, row unsafe.Pointer, n int)

//go:noescape
func idxDots4x4Z(acc *[4]lanes, keys *[4]unsafe.Pointer, qt *float32, qs int, c *float32, dim int)

//go:noescape
func idxDots4x1Z(acc *[4]lanes, keys *[4]unsafe.Pointer, qt *float32, qs int, c *float32, dim int)

//go:noescape
func idxDots4x4Y(acc *[4]lanes, keys *[4]unsafe.Pointer, qt *float32, qs int, c *float32, dim int)

//go:noescape
func idxDots4x1Y(acc *[4]lanes, keys *[4]unsafe.Pointer, qt *float32, qs int, c *float32, dim int)

// Row loops of the one-token kernels: quads groups of four rows, each
// group's sums reduced in the routine (by sumLanesGo's tree) and stored.

//go:noescape
func dotFP4RowsZ(y *float32, w *byte, ws int, s *byte, ss int, x *float32, groups int, quads int, tab *fp4Tables)

//go:noescape
func dotFP4RowsY(y *float32, w *byte, ws int, s *byte, ss int, x *float32, groups int, quads int, tab *fp4Tables)

//go:noescape
func dotFP8RowsZ(y *float32, w *byte, ws int, s *byte, x *float32, n, bc, quads int)

//go:noescape
func dotFP8RowsY(y *float32, w *byte, ws int, s *byte, x *float32, n, bc, quads int)

//go:noescape
func absRangeZ(x *float32, n int) (lo, hi uint32)

//go:noescape
func absRangeY(x *float32, n int) (lo, hi uint32)

// axpyZ and axpyY add a·x[i] to y[i] for i < n (n a multiple of 16 or 8),
// the product rounded before the add (no fused multiply-add).
//
//go:noescape
func axpyZ(y *float32, a float32, x *float32, n int)

//go:noescape
func axpyY(y *float32, a float32, x *float32, n int)
