package cpu

import (
	"math"
	"syscall"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// The KernelsAMX family multiplies FP8, FP4 and BF16 weights with Intel
// AMX bf16 tiles, T=1 included (so that it is batch-invariant like every
// family); F32 and F16 weights go through the AVX-512 kernels, exactly.
//
// Numerics (lossy, so never picked by KernelsAuto): every activation is
// rounded to bfloat16 (to nearest, ties to even: 8 significant bits); the
// weights are exact in bf16 (an e4m3 or e2m1 value times a power of two),
// except that AMX reads bf16 subnormals as zero; TDPBF16PS sums the
// products of each 32 columns in float32 in its own order, flushing
// subnormal results to zero, and the 32-column steps accumulate in column
// order. TestAMXNumerics measures the error against the float32 kernels.

// amxOK reports whether the CPU has AMX-BF16 and the kernel granted this
// process the tile data state. Set at initialization, never written after.
var amxOK = hasAVX512 && cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 && requestAMX()

// requestAMX asks Linux for permission to use the AMX tile data
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); without it the
// first tile instruction faults.
func requestAMX() bool {
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}

// amxCfg is the tile configuration: palette 1, the eight tiles all 16 rows
// of 64 bytes. Never written after initialization.
var amxCfg = func() (c [64]byte) {
	c[0] = 1
	for t := range 8 {
		c[16+2*t] = 64
		c[48+t] = 16
	}
	return c
}()

var amxSet = kernelSet{family: KernelsAMX, fp4Perm: true, vector: true, amx: true, vec: vecAsm{z: true}}

//go:noescape
func amxGemm(cfg *[64]byte, a *uint16, lda int, b0, b1 *uint16, c *float32, steps int)

//go:noescape
func decFP8BZ(dst *uint16, w *byte, n int, s int)

//go:noescape
func decFP4BZ(dst *uint16, w *byte, s *byte, groups int, tab *fp4Tables)

// decodeRow writes row r of the matrix, dequantized exactly to bf16 in
// kernel layout and zero-padded, to dst (kpa values); f is scratch of kpa
// float32s. FP8 blocks the fast routine does not take are decoded by the
// portable decoder and truncated: the same values, so the same bits.
func (j *amxJob) decodeRow(dst []uint16, f []float32, r int) {
	w, K := j.w, j.K
	switch w.DType {
	case compute.BF16:
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 2*K), w.Data[2*r*K:2*(r+1)*K])
	case compute.FP4:
		g := K / compute.FP4GroupSize
		decFP4BZ(&dst[0], &w.Data[r*K/2], &w.Scale[r*g], g, &fp4Tab)
	case compute.FP8:
		br := r / w.BlockRows
		scales := w.Scale[br*j.scaleCols : (br+1)*j.scaleCols]
		q, bc := w.Data[r*K:(r+1)*K], w.BlockCols
		for b := 0; b*bc < K; b++ {
			c0, c1 := b*bc, min((b+1)*bc, K)
			t := c0
			if n, s := (c1-c0)&^15, scales[b]; bc%16 == 0 && s <= maxFastScale && n > 0 && !(!w.NaNFree && j.k.vec.hasNaN(q[c0:c1])) {
				decFP8BZ(&dst[c0], &q[c0], n, int(s))
				t += n
			}
			if t < c1 {
				decodeFP8Go(f[t:c1], q[t:c1], scales[b:b+1], bc)
				for i := t; i < c1; i++ {
					dst[i] = uint16(math.Float32bits(f[i]) >> 16)
				}
			}
		}
	}
	clear(dst[K:])
}

// amxTakes reports whether the AMX kernels multiply matrices of dtype dt
// (whose weights are exact in bf16).
func amxTakes(dt compute.DType) bool {
	return dt == compute.FP8 || dt == compute.FP4 || dt == compute.BF16
}

const (
	amxRows = 32  // weight rows per item: two tiles of 16
	amxToks = 256 // tokens per tile of the job (16 groups of 16)
)

// amxJob is one MatMul through the AMX kernels. Its items are chunks of 32
// rows times tiles of tokens, tile-major.
type amxJob struct {
	k         *kernelSet
	w         *compute.Matrix
	y         []float32
	T, K, kpa int      // kpa: columns padded to a multiple of 32
	panels    []uint16 // the tokens, 16 per VNNI panel of kpa*16 bf16s
	scaleCols int
	rowChunks int
	tiles     int
	items     int
}

// amxMatMul is MatMul through the AMX kernels; x is the packed activations
// (T rows of stride kp, in kernel layout).
func (s *state) amxMatMul(y, x []float32, T, kp int, w *compute.Matrix) {
	K := w.Cols
	kpa := roundUp(K, 32)
	groups := (T + 15) / 16
	n := groups * kpa * 16
	if cap(s.amxPanels) < n {
		s.amxPanels = make([]uint16, n)
	}
	p := s.amxPanels[:n]
	clear(p)
	for t := range T {
		g, c := t/16, t%16
		panel := p[g*kpa*16 : (g+1)*kpa*16]
		row := x[t*kp : t*kp+K]
		for k, v := range row {
			panel[(k/2)*32+2*c+k%2] = quant.Float32ToBF16(v)
		}
	}
	j := &s.amx
	*j = amxJob{k: s.k, w: w, y: y[:T*w.Rows], T: T, K: K, kpa: kpa, panels: p}
	if w.DType == compute.FP8 {
		j.scaleCols = (K + w.BlockCols - 1) / w.BlockCols
	}
	j.rowChunks = (w.Rows + amxRows - 1) / amxRows
	j.tiles = (T + amxToks - 1) / amxToks
	j.items = j.rowChunks * j.tiles
	for i := range s.ws {
		ws := &s.ws[i]
		ws.wbuf = grow(ws.wbuf, kpa)
		if cap(ws.amxA) < amxRows*kpa {
			ws.amxA = make([]uint16, amxRows*kpa)
		}
	}
	const minWork = 1 << 18 // multiply-adds per worker worth a wake-up
	s.parallel(j, min(j.items, max(1, w.Rows*K*T/minWork)))
	*j = amxJob{}
}

func (j *amxJob) run(s *state, worker int) {
	ws := &s.ws[worker]
	for {
		it, ok := s.claim(j.items)
		if !ok {
			return
		}
		rc, tc := it%j.rowChunks, it/j.rowChunks
		j.rows(ws, rc*amxRows, min((rc+1)*amxRows, j.w.Rows), tc*amxToks, min((tc+1)*amxToks, j.T))
	}
}

// rows computes y[t][r] for rows [r0, r1) and tokens [t0, t1): it decodes
// the rows to bf16 (zero-padded to 32 rows of kpa columns), then
// multiplies them with two groups of 16 tokens per amxGemm call.
func (j *amxJob) rows(ws *workspace, r0, r1, t0, t1 int) {
	kpa, R := j.kpa, j.w.Rows
	a := ws.amxA[:amxRows*kpa]
	f := ws.wbuf[:kpa]
	for i := range amxRows {
		dst := a[i*kpa : (i+1)*kpa]
		r := r0 + i
		if r >= r1 {
			clear(dst)
			continue
		}
		j.decodeRow(dst, f, r)
	}
	g0, g1 := t0/16, (t1+15)/16
	gs := kpa * 16
	c := &ws.amxC
	for g := g0; g < g1; g += 2 {
		var b1 *uint16
		if g+1 < g1 {
			b1 = &j.panels[(g+1)*gs]
		}
		amxGemm(&amxCfg, &a[0], 2*kpa, &j.panels[g*gs], b1, &c[0], kpa/32)
		for gi := range min(2, g1-g) {
			for t := (g + gi) * 16; t < min((g+gi+1)*16, t1); t++ {
				n := t % 16
				yt := j.y[t*R : (t+1)*R]
				for i := range r1 - r0 {
					yt[r0+i] = c[(i/16)*512+gi*256+(i%16)*16+n]
				}
			}
		}
	}
}
