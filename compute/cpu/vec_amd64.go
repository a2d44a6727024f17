package cpu

import (
	"math"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// CPU features, detected once at initialization and never written after.
var (
	hasAVX512 = cpu.X86.HasAVX512 && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
)

// cpuName returns the processor's model name, for error messages.
func cpuName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "amd64"
}

// vecAsm calls one instruction set's assembly routines (vec_avx512_amd64.s
// when z is set, vec_avx2_amd64.s otherwise). They all compute the vector
// arithmetic: the products of a row with a token go into 16 float32 lanes,
// lane l summing the columns k ≡ l (mod 16) of the kernel layout in
// increasing order with fused multiply-adds; the AVX2 routines hold the 16
// lanes in two YMM registers and so compute the same bits as the AVX-512
// ones. Lengths n are multiples of 16 columns.
type vecAsm struct{ z bool }

// dotF32, dotBF16, dotF16 add row i of w (4 row pointers) times x to
// acc[i], over n columns.
func (a vecAsm) dotF32(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int) {
	if a.z {
		dotF32Z(acc, w, x, n)
	} else {
		dotF32Y(acc, w, x, n)
	}
}

func (a vecAsm) dotBF16(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int) {
	if a.z {
		dotBF16Z(acc, w, x, n)
	} else {
		dotBF16Y(acc, w, x, n)
	}
}

func (a vecAsm) dotF16(acc *[4]lanes, w *[4]unsafe.Pointer, x *float32, n int) {
	if a.z {
		dotF16Z(acc, w, x, n)
	} else {
		dotF16Y(acc, w, x, n)
	}
}

// dotFP8 is the same for four e4m3 rows sharing one row of block scales s
// (every scale at most maxFastScale); bc is a multiple of 16.
func (a vecAsm) dotFP8(acc *[4]lanes, w *[4]unsafe.Pointer, s *byte, x *float32, n, bc int) {
	if a.z {
		dotFP8Z(acc, w, s, x, n, bc)
	} else {
		dotFP8Y(acc, w, s, x, n, bc)
	}
}

// dotFP4 is the same for the four e2m1 rows at w + i*ws with their scales
// at s + i*ss, over g groups of 32 columns, x de-interleaved.
func (a vecAsm) dotFP4(acc *[4]lanes, w *byte, ws int, s *byte, ss int, x *float32, g int) {
	if a.z {
		dotFP4Z(acc, w, ws, s, ss, x, g, &fp4Tab)
	} else {
		dotFP4Y(acc, w, ws, s, ss, x, g, &fp4Tab)
	}
}

// decBF16, decF16 write n decoded values to dst.
func (a vecAsm) decBF16(dst *float32, w *byte, n int) {
	if a.z {
		decBF16Z(dst, w, n)
	} else {
		decBF16Y(dst, w, n)
	}
}

func (a vecAsm) decF16(dst *float32, w *byte, n int) {
	if a.z {
		decF16Z(dst, w, n)
	} else {
		decF16Y(dst, w, n)
	}
}

// decFP8 writes n e4m3 values times the UE8M0 scale s (at most
// maxFastScale) to dst.
func (a vecAsm) decFP8(dst *float32, w *byte, n int, s int) {
	if a.z {
		decFP8Z(dst, w, n, s)
	} else {
		decFP8Y(dst, w, n, s)
	}
}

// decFP4 writes g groups of e2m1 values times their scales, each group
// de-interleaved, to dst.
func (a vecAsm) decFP4(dst *float32, w *byte, s *byte, g int) {
	if a.z {
		decFP4Z(dst, w, s, g, &fp4Tab)
	} else {
		decFP4Y(dst, w, s, g, &fp4Tab)
	}
}

// nanE4M3 reports whether the n bytes at p (a multiple of 64) hold an e4m3
// NaN code (0x7F or 0xFF).
func (a vecAsm) nanE4M3(p *byte, n int) bool {
	if a.z {
		return nanE4M3Z(p, n)
	}
	return nanE4M3Y(p, n)
}

// absRange is absRangeGo, its multiples of 16 values in assembly.
func (a vecAsm) absRange(x []float32) (lo, hi uint32) {
	n := len(x) &^ 15
	lo, hi = math.MaxUint32, 0
	if n > 0 {
		if a.z {
			lo, hi = absRangeZ(&x[0], n)
		} else {
			lo, hi = absRangeY(&x[0], n)
		}
	}
	l, h := absRangeGo(x[n:])
	return min(lo, l), max(hi, h)
}

// fp4Tables are the lookup tables of the FP4 routines. Never written.
type fp4Tables struct {
	e2m1  [16]float32  // by code; the first 8 are the magnitudes
	ue8m0 [256]float32 // by scale byte
	sign  uint32       // the float32 sign bit, for the AVX2 routines
	// scaled[s] is e2m1 times ue8m0[s], each entry the float32 product
	// the routines would otherwise compute per group: one 64-byte load
	// instead of a broadcast and a multiply per row and group (16 KiB,
	// cache-line aligned; the few scales a matrix uses stay in L1).
	scaled *[256][16]float32
}

var fp4Tab = func() (t fp4Tables) {
	for i := range t.e2m1 {
		t.e2m1[i] = quant.E2M1ToFloat32(byte(i))
	}
	for i := range t.ue8m0 {
		t.ue8m0[i] = quant.UE8M0ToFloat32(byte(i))
	}
	t.sign = 1 << 31
	buf := make([]float32, 256*16+16)
	off := (64 - int(uintptr(unsafe.Pointer(&buf[0]))%64)) % 64 / 4
	t.scaled = (*[256][16]float32)(unsafe.Pointer(&buf[off]))
	for s := range t.scaled {
		for c := range t.e2m1 {
			t.scaled[s][c] = t.e2m1[c] * t.ue8m0[s]
		}
	}
	return t
}()

var avx512Set = kernelSet{family: KernelsAVX512, fp4Perm: true, vector: true, vec: vecAsm{z: true}}

var avx2Set = kernelSet{family: KernelsAVX2, fp4Perm: true, vector: true, vec: vecAsm{z: false}}

func bptr(b []byte) *byte { return unsafe.SliceData(b) }

// gemmRows and gemmToks are the shape of the prefill block: rows decoded
// together, tokens multiplied with them per call of gemm.
func (a vecAsm) gemmRows() int {
	if a.z {
		return 8
	}
	return 4
}

func (a vecAsm) gemmToks() int {
	if a.z {
		return 3
	}
	return 4
}

// gemmBlock adds to acc[t*gemmRows()+i] the products of row i of the
// decoded rows wb (stride kp) with token t of xs, over n columns (a
// multiple of 16): gemmRows() rows, gemmToks() tokens.
func (a vecAsm) gemmBlock(acc []lanes, wb []float32, kp int, xs *[4][]float32, n int) {
	R, T := a.gemmRows(), a.gemmToks()
	_ = wb[(R-1)*kp+n-1]
	var p [4]unsafe.Pointer
	for t := range T {
		p[t] = unsafe.Pointer(unsafe.SliceData(xs[t][:n]))
	}
	if a.z {
		gemm83Z((*[24]lanes)(acc[:24]), unsafe.SliceData(wb), kp, &p, n)
	} else {
		gemmY((*[16]lanes)(acc[:16]), unsafe.SliceData(wb), kp, &p, n)
	}
}

// decodeRow writes row r of w, dequantized, in kernel layout, to dst[:Cols].
// Whatever routine decodes a value, the value is exact, so rows decode to
// the same bits as dot4 multiplies (NaN payloads aside, which take the
// portable decoder in both).
func (a vecAsm) decodeRow(dst []float32, w *compute.Matrix, r int, fp8Scales []byte) {
	K := w.Cols
	n := K &^ 15
	dst = dst[:K]
	switch w.DType {
	case compute.F32:
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*K), w.Data[4*r*K:4*(r+1)*K])
	case compute.BF16:
		q := w.Data[2*r*K : 2*(r+1)*K]
		if n > 0 {
			a.decBF16(&dst[0], bptr(q), n)
		}
		decodeBF16Go(dst[n:], q[2*n:])
	case compute.F16:
		q := w.Data[2*r*K : 2*(r+1)*K]
		if n > 0 {
			a.decF16(&dst[0], bptr(q), n)
		}
		decodeF16Go(dst[n:], q[2*n:])
	case compute.FP8:
		a.decodeFP8(dst, w.Data[r*K:(r+1)*K], fp8Scales, w.BlockCols, !w.NaNFree)
	case compute.FP4:
		g := K / compute.FP4GroupSize
		a.decFP4(&dst[0], bptr(w.Data[r*K/2:(r+1)*K/2]), bptr(w.Scale[r*g:(r+1)*g]), g)
	}
}

// decodeFP8 decodes one e4m3 row block by block: the assembly routine for
// the whole vectors of blocks whose scale it takes and that hold no NaN
// code (when checkNaN), the portable decoder for the rest.
func (a vecAsm) decodeFP8(dst []float32, q, scales []byte, bc int, checkNaN bool) {
	K := len(q)
	if bc%16 != 0 {
		decodeFP8Go(dst, q, scales, bc)
		return
	}
	for j := 0; j*bc < K; j++ {
		c0, c1 := j*bc, min((j+1)*bc, K)
		t := c0
		if n, s := (c1-c0)&^15, scales[j]; s <= maxFastScale && n > 0 && !(checkNaN && a.hasNaN(q[c0:c1])) {
			a.decFP8(&dst[c0], &q[c0], n, int(s))
			t += n
		}
		if t < c1 {
			decodeFP8Go(dst[t:c1], q[t:c1], scales[j:j+1], bc)
		}
	}
}

// hasNaN reports whether q holds an e4m3 NaN code.
func (a vecAsm) hasNaN(q []byte) bool {
	n := len(q) &^ 63
	if n > 0 && a.nanE4M3(&q[0], n) {
		return true
	}
	for _, b := range q[n:] {
		if b&0x7F == 0x7F {
			return true
		}
	}
	return false
}

// dot4 returns the products of four rows with the packed activations x.
func (a vecAsm) dot4(ws *workspace, r *row4, w *compute.Matrix, x []float32) [4]float32 {
	K := w.Cols
	n := K &^ 15
	x = x[:roundUp(K, 16)]
	var acc [4]lanes
	var p [4]unsafe.Pointer
	switch w.DType {
	case compute.F32:
		for i := range p {
			p[i] = unsafe.Pointer(bptr(r.w[i][:4*K]))
		}
		if n > 0 {
			a.dotF32(&acc, &p, &x[0], n)
		}
	case compute.BF16:
		for i := range p {
			p[i] = unsafe.Pointer(bptr(r.w[i][:2*K]))
		}
		if n > 0 {
			a.dotBF16(&acc, &p, &x[0], n)
		}
	case compute.F16:
		for i := range p {
			p[i] = unsafe.Pointer(bptr(r.w[i][:2*K]))
		}
		if n > 0 {
			a.dotF16(&acc, &p, &x[0], n)
		}
	case compute.FP8:
		if !a.fp8Fast(r, w) {
			return a.dot4Decoded(ws, r, w, x)
		}
		for i := range p {
			p[i] = unsafe.Pointer(bptr(r.w[i][:K]))
		}
		if n > 0 {
			a.dotFP8(&acc, &p, bptr(r.s[0]), &x[0], n, w.BlockCols)
		}
	case compute.FP4:
		// The routine takes rows at a fixed stride: consecutive rows, not a
		// short group that repeats its last row.
		rb, g := K/2, K/compute.FP4GroupSize
		if uintptr(unsafe.Pointer(bptr(r.w[3])))-uintptr(unsafe.Pointer(bptr(r.w[0]))) != uintptr(3*rb) {
			return a.dot4Decoded(ws, r, w, x)
		}
		a.dotFP4(&acc, bptr(r.w[0]), rb, bptr(r.s[0]), g, &x[0], g)
		return reduce4(&acc)
	}
	if n < K {
		a.tail(&acc, r, w, x, n)
	}
	return reduce4(&acc)
}

// fp8Fast reports whether the FP8 routine takes the four rows: one shared
// row of block scales, none too large, block widths of whole vectors, and
// no NaN code unless the matrix promises none.
func (a vecAsm) fp8Fast(r *row4, w *compute.Matrix) bool {
	if w.BlockCols%16 != 0 || bptr(r.s[0]) != bptr(r.s[3]) {
		return false
	}
	for _, s := range r.s[0] {
		if s > maxFastScale {
			return false
		}
	}
	if !w.NaNFree {
		for i := range r.w {
			if a.hasNaN(r.w[i][:w.Cols]) {
				return false
			}
		}
	}
	return true
}

// dot4Decoded decodes the four rows with decodeRow's decoders into ws.wbuf
// (zero-padded to whole vectors) and multiplies them with the F32 routine:
// the same values as the fast routines multiply, in the same order.
func (a vecAsm) dot4Decoded(ws *workspace, r *row4, w *compute.Matrix, x []float32) [4]float32 {
	K := w.Cols
	kp := roundUp(K, 16)
	ws.wbuf = grow(ws.wbuf, 4*kp)
	var p [4]unsafe.Pointer
	for i := range 4 {
		row := ws.wbuf[i*kp : (i+1)*kp]
		switch w.DType {
		case compute.FP8:
			a.decodeFP8(row, r.w[i][:K], r.s[i], w.BlockCols, !w.NaNFree)
		case compute.FP4:
			a.decFP4(&row[0], bptr(r.w[i]), bptr(r.s[i]), K/compute.FP4GroupSize)
		}
		clear(row[K:])
		p[i] = unsafe.Pointer(&row[0])
	}
	var acc [4]lanes
	a.dotF32(&acc, &p, &x[0], kp)
	return reduce4(&acc)
}

// tail adds the products of columns [n, K) (fewer than 16) of the four rows,
// decoded by the portable decoders into zero-padded vectors, to acc: what
// the prefill kernels compute on their zero-padded rows.
func (a vecAsm) tail(acc *[4]lanes, r *row4, w *compute.Matrix, x []float32, n int) {
	K := w.Cols
	var t [4][16]float32
	var p [4]unsafe.Pointer
	for i := range t {
		d := t[i][:K-n]
		switch w.DType {
		case compute.F32:
			decodeF32Go(d, r.w[i][4*n:4*K])
		case compute.BF16:
			decodeBF16Go(d, r.w[i][2*n:2*K])
		case compute.F16:
			decodeF16Go(d, r.w[i][2*n:2*K])
		case compute.FP8:
			bc := w.BlockCols
			for c := n; c < K; c++ {
				d[c-n] = quant.E4M3ToFloat32(r.w[i][c]) * quant.UE8M0ToFloat32(r.s[i][c/bc])
			}
		}
		p[i] = unsafe.Pointer(&t[i])
	}
	a.dotF32(acc, &p, &x[n], 16)
}

// reduce4 sums each row's lanes with the fixed tree of sumLanesGo.
func reduce4(acc *[4]lanes) (out [4]float32) {
	for i := range out {
		out[i] = sumLanesGo(&acc[i])
	}
	return out
}

// dotRows computes y[r] = W[r]·x for the rows [r0, r1) that its row loops
// take, four at a time, and returns the first row it left (the caller
// finishes with dot4): the same sums as dot4 and reduce4 compute, with no
// Go between groups of rows. It takes FP4 matrices, and FP8 ones whose
// block rows its FP8 routine takes (NaN-free, whole vectors, every scale in
// fr, which is within maxFastScale).
func (a vecAsm) dotRows(y []float32, w *compute.Matrix, r0, r1 int, x []float32, fr fp8Range) int {
	K := w.Cols
	_ = x[roundUp(K, 16)-1]
	switch w.DType {
	case compute.FP4:
		quads := (r1 - r0) / 4
		if quads == 0 {
			return r0
		}
		rb, g := K/2, K/compute.FP4GroupSize
		_ = y[r0+4*quads-1]
		_ = w.Data[(r0+4*quads)*rb-1]
		_ = w.Scale[(r0+4*quads)*g-1]
		if a.z {
			dotFP4RowsZ(&y[r0], &w.Data[r0*rb], rb, &w.Scale[r0*g], g, &x[0], g, quads, &fp4Tab)
		} else {
			dotFP4RowsY(&y[r0], &w.Data[r0*rb], rb, &w.Scale[r0*g], g, &x[0], g, quads, &fp4Tab)
		}
		return r0 + 4*quads
	case compute.FP8:
		bc := w.BlockCols
		if K%16 != 0 || bc%16 != 0 || !w.NaNFree {
			return r0
		}
		sc := (K + bc - 1) / bc
		for r0 < r1 {
			br := r0 / w.BlockRows
			quads := (min(r1, (br+1)*w.BlockRows) - r0) / 4
			if quads == 0 {
				return r0
			}
			srow := w.Scale[br*sc : (br+1)*sc]
			for _, v := range srow {
				if int(v) < fr.lo || int(v) > fr.hi {
					return r0
				}
			}
			_ = y[r0+4*quads-1]
			_ = w.Data[(r0+4*quads)*K-1]
			if a.z {
				dotFP8RowsZ(&y[r0], &w.Data[r0*K], K, &srow[0], &x[0], K, bc, quads)
			} else {
				dotFP8RowsY(&y[r0], &w.Data[r0*K], K, &srow[0], &x[0], K, bc, quads)
			}
			r0 += 4 * quads
		}
	}
	return r0
}

// axpy adds a·x to y (len(y) values of x): each product rounded to float32,
// then added, as axpyGo does, so the bits are the same on every path; the
// multiples of 16 (AVX-512) or 8 (AVX2) values in assembly.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	n := 0
	switch {
	case hasAVX512:
		n = len(y) &^ 15
		if n > 0 {
			axpyZ(&y[0], a, &x[0], n)
		}
	case hasAVX2:
		n = len(y) &^ 7
		if n > 0 {
			axpyY(&y[0], a, &x[0], n)
		}
	}
	axpyGo(y[n:], a, x[n:])
}
