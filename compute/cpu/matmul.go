package cpu

import (
	"math"

	"github.com/strata-inference/strata/compute"
)

// groupRows is the number of weight rows the prefill kernels decode together
// and multiply with each pair of tokens.
const groupRows = 4

// workspace is one worker's scratch, reused across calls.
type workspace struct {
	wbuf []float32              // groupRows decoded weight rows, stride kp
	acc  [][2 * groupRows]lanes // portable prefill accumulators, one set per pair of tokens
	accv []lanes                // vector prefill accumulators (see gemmRowsVec)

	amxA []uint16         // AMX: amxRows decoded weight rows in bf16
	amxC [4 * 256]float32 // AMX: the four output tiles of one amxGemm

	ropeCos, ropeSin []float32
	ropePos          int32
	ropeValid        bool

	att attnWork // SparseAttention
	idx idxWork  // IndexerSelect
}

// MatMul computes y[t] = W · x[t] for t in [0, T): x is [T, W.Cols] and y is
// [T, W.Rows], both row-major. Weights are dequantized inside the kernel
// exactly (every stored value times its power-of-two scale is a float32) and
// the products accumulated in float32. It panics if W is invalid or x or y
// is too short.
func (b *Backend) MatMulF32(y, x []float32, T int, w *compute.Matrix) {
	if err := w.Validate(); err != nil {
		panic("cpu: MatMul: " + err.Error())
	}
	checkLen("MatMul x", x, T*w.Cols)
	checkLen("MatMul y", y, T*w.Rows)
	if T <= 0 {
		return
	}
	s := b.s
	K := w.Cols
	kp := roundUp(K, 16)
	s.xbuf = grow(s.xbuf, T*kp)
	perm := w.DType == compute.FP4 && s.k.fp4Perm
	for t := range T {
		packX(s.xbuf[t*kp:(t+1)*kp], x[t*K:(t+1)*K], perm)
	}
	if s.k.amx && amxTakes(w.DType) {
		s.amxMatMul(y, s.xbuf[:T*kp], T, kp, w)
		return
	}

	j := &s.mm
	*j = matmulJob{k: s.k, w: w, y: y[:T*w.Rows], x: s.xbuf[:T*kp], T: T, kp: kp}
	if w.DType == compute.FP8 {
		j.scaleCols = (w.Cols + w.BlockCols - 1) / w.BlockCols
		if T == 1 && s.k.vector {
			j.fp8 = fp8RangeOf(s.k.vec.absRange(x[:K]))
		}
	}
	j.tile, j.tiles = 1, 1
	if T == 1 {
		j.chunk = max(8, roundUp((w.Rows+16*s.threads-1)/(16*s.threads), groupRows))
	} else {
		j.chunk = s.k.groupRows()
		j.tile = min(T, max(16, xTileBytes/(4*kp)&^1))
		if s.k.vector {
			gt := s.k.vec.gemmToks()
			j.tile = min(T, max(4*gt, vecTileBytes/(4*kp)/gt*gt))
		}
		j.tiles = (T + j.tile - 1) / j.tile
		for i := range s.ws {
			ws := &s.ws[i]
			ws.wbuf = grow(ws.wbuf, j.chunk*kp)
			if !s.k.vector {
				if n := (j.tile + 1) / 2; cap(ws.acc) < n {
					ws.acc = make([][2 * groupRows]lanes, n)
				}
			} else if gt := s.k.vec.gemmToks(); cap(ws.accv) < (j.tile+gt-1)/gt*gt*j.chunk {
				ws.accv = make([]lanes, (j.tile+gt-1)/gt*gt*j.chunk)
			}
		}
	}
	j.rowChunks = (w.Rows + j.chunk - 1) / j.chunk
	j.items = j.rowChunks * j.tiles
	const minWork = 1 << 16 // multiply-adds per worker worth a wake-up
	workers := min(j.items, max(1, w.Rows*K*T/minWork))
	s.parallel(j, workers)
	*j = matmulJob{}
}

// packX copies the activation row x into dst, in the layout the kernels read
// (de-interleaved per 32 columns when perm is set), zero-padded to len(dst).
func packX(dst, x []float32, perm bool) {
	if perm {
		for g := 0; g+32 <= len(x); g += 32 {
			src, d := x[g:g+32:g+32], dst[g:g+32:g+32]
			for i := range 16 {
				d[i] = src[2*i]
				d[16+i] = src[2*i+1]
			}
		}
	} else {
		copy(dst, x)
	}
	clear(dst[len(x):])
}

// matmulJob is one MatMul call. Its items are chunks of rows, times tiles of
// tokens when T > 1, tile-major: the workers go through all rows for one tile
// of tokens before the next, so that the tile's activations stay in cache.
type matmulJob struct {
	k           *kernelSet
	w           *compute.Matrix
	y, x        []float32 // x is packed: T rows of stride kp
	T, kp       int
	scaleCols   int      // FP8: scale blocks per block row
	fp8         fp8Range // FP8 at T = 1 on a vector family: see fp8XRange
	chunk       int      // rows per item
	rowChunks   int      // chunks of rows
	tile, tiles int      // tokens per tile, tiles
	items       int
}

// xTileBytes bounds the activations of one tile of tokens, which every row
// group of the tile reads: a share of a last-level cache.
const xTileBytes = 8 << 20

func (j *matmulJob) run(s *state, worker int) {
	for {
		it, ok := s.claim(j.items)
		if !ok {
			return
		}
		rc, tc := it%j.rowChunks, it/j.rowChunks
		r0, r1 := rc*j.chunk, min((rc+1)*j.chunk, j.w.Rows)
		switch {
		case j.T == 1:
			j.dotRows(&s.ws[worker], r0, r1)
		case j.k.vector:
			j.gemmRowsVec(&s.ws[worker], r0, r1, tc*j.tile, min((tc+1)*j.tile, j.T))
		default:
			j.gemmRows(&s.ws[worker], r0, r1, tc*j.tile, min((tc+1)*j.tile, j.T))
		}
	}
}

// dotRows computes y[r] = W[r] · x for one token, reading each row once,
// four rows at a time with the prefill kernels' arithmetic (see dot4.go):
// the vector families' row loops take the rows they can (vecAsm.dotRows,
// the same bits as dot4), dot4 the rest.
func (j *matmulJob) dotRows(ws *workspace, r0, r1 int) {
	if j.k.vector {
		r0 = j.k.vec.dotRows(j.y, j.w, r0, r1, j.x, j.fp8)
	}
	j.dotRows4(ws, r0, r1)
}

// dotRows4 is dotRows through dot4 alone, one group of four rows per call.
func (j *matmulJob) dotRows4(ws *workspace, r0, r1 int) {
	w, x, y := j.w, j.x, j.y
	K := w.Cols
	var rs row4
	for r := r0; r < r1; r += 4 {
		for i := range 4 {
			ri := min(r+i, r1-1) // a short group repeats its last row
			switch w.DType {
			case compute.F32:
				rs.w[i] = w.Data[4*ri*K : 4*(ri+1)*K]
			case compute.BF16, compute.F16:
				rs.w[i] = w.Data[2*ri*K : 2*(ri+1)*K]
			case compute.FP8:
				rs.w[i], rs.s[i] = w.Data[ri*K:(ri+1)*K], j.fp8Scales(ri)
			case compute.FP4:
				g := K / compute.FP4GroupSize
				rs.w[i], rs.s[i] = w.Data[ri*K/2:(ri+1)*K/2], w.Scale[ri*g:(ri+1)*g]
			}
		}
		out := j.k.dot4(ws, &rs, w, x)
		for i := range min(4, r1-r) {
			y[r+i] = out[i]
		}
	}
}

// fp8Scales returns the scales of the column blocks of row r of an FP8 matrix.
func (j *matmulJob) fp8Scales(r int) []byte {
	br := r / j.w.BlockRows
	return j.w.Scale[br*j.scaleCols : (br+1)*j.scaleCols]
}

// decodeRow writes row r of W, dequantized and in kernel layout, to dst[:Cols].
func (j *matmulJob) decodeRow(ws *workspace, dst []float32, r int) {
	var sc []byte
	if j.w.DType == compute.FP8 {
		sc = j.fp8Scales(r)
	}
	j.k.decode(ws, dst, j.w, r, sc)
}

// gemmRows computes y[t][r] for rows [r0, r1) (at most groupRows) and tokens
// [t0, t1): it decodes the rows into ws.wbuf, then multiplies them with two
// tokens at a time, over chunks of kChunk columns so that the decoded rows
// and the tokens' columns stay in cache; the partial sums of each pair of
// tokens wait in ws.acc between chunks.
func (j *matmulJob) gemmRows(ws *workspace, r0, r1, t0, t1 int) {
	kp, K, R := j.kp, j.w.Cols, j.w.Rows
	wb := ws.wbuf[:groupRows*kp]
	for i := range groupRows {
		row := wb[i*kp : (i+1)*kp]
		if r := r0 + i; r < r1 {
			j.decodeRow(ws, row[:K], r)
			clear(row[K:])
		} else {
			clear(row)
		}
	}
	n := t1 - t0
	pairs := (n + 1) / 2
	acc := ws.acc[:pairs]
	clear(acc)
	x := j.x[t0*kp : t1*kp]
	for c0 := 0; c0 < kp; c0 += kChunk {
		c1 := min(c0+kChunk, kp)
		w := wb[c0:]
		for p := range n / 2 {
			t := 2 * p
			gemm4x2Go(w, kp, x[t*kp+c0:t*kp+c1], x[(t+1)*kp+c0:(t+1)*kp+c1], &acc[p])
		}
		if n%2 == 1 {
			t := n - 1
			gemm4x1Go(w, kp, x[t*kp+c0:t*kp+c1], (*[groupRows]lanes)(acc[pairs-1][:groupRows]))
		}
	}
	nr := r1 - r0
	y := j.y[t0*R : t1*R]
	for p := range n / 2 {
		t := 2 * p
		for i := range nr {
			y[t*R+r0+i] = sumLanesGo(&acc[p][2*i])
			y[(t+1)*R+r0+i] = sumLanesGo(&acc[p][2*i+1])
		}
	}
	if n%2 == 1 { // the last token's sums are in acc[pairs-1][:groupRows]
		t := n - 1
		for i := range nr {
			y[t*R+r0+i] = sumLanesGo(&acc[pairs-1][i])
		}
	}
}

// kChunk is the number of columns the prefill kernels take at a time: 4
// decoded rows and 2 tokens of kChunk float32s fit in a 32 KiB L1 cache.
const kChunk = 1024

// lanes holds one vector accumulator of the kernels; its sum (sumLanesGo) is
// the dot product.
type lanes [16]float32

func sumLanesGo(l *lanes) float32 {
	var s [4]float32
	for i := range s {
		s[i] = (l[i] + l[i+4]) + (l[i+8] + l[i+12])
	}
	return (s[0] + s[2]) + (s[1] + s[3])
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// grow returns s resliced to length n, reallocated only if too small.
func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// gemmRowsVec is gemmRows for the vector kernels: it decodes the rows
// [r0, r1) (at most gemmRows of them) and multiplies them with gemmToks
// tokens at a time (the last block repeats the tile's last token as
// needed), over chunks of vecChunk columns; each row and token sums in 16
// lanes across the chunks, its accumulator waiting in ws.accv between them.
func (j *matmulJob) gemmRowsVec(ws *workspace, r0, r1, t0, t1 int) {
	kp, K, R := j.kp, j.w.Cols, j.w.Rows
	v := j.k.vec
	gr, gt := v.gemmRows(), v.gemmToks()
	wb := ws.wbuf[:gr*kp]
	for i := range gr {
		row := wb[i*kp : (i+1)*kp]
		if r := r0 + i; r < r1 {
			j.decodeRow(ws, row[:K], r)
			clear(row[K:])
		} else {
			clear(row)
		}
	}
	n := t1 - t0
	blocks := (n + gt - 1) / gt
	acc := ws.accv[:blocks*gt*gr]
	clear(acc)
	x := j.x[t0*kp : t1*kp]
	var xs [4][]float32
	for c0 := 0; c0 < kp; c0 += vecChunk {
		c1 := min(c0+vecChunk, kp)
		for b := range blocks {
			for t := range gt {
				tt := min(b*gt+t, n-1)
				xs[t] = x[tt*kp+c0 : tt*kp+c1]
			}
			v.gemmBlock(acc[b*gt*gr:(b+1)*gt*gr], wb[c0:], kp, &xs, c1-c0)
		}
	}
	nr := r1 - r0
	y := j.y[t0*R : t1*R]
	for t := range n {
		a := acc[t*gr:]
		for i := range nr {
			y[t*R+r0+i] = sumLanesGo(&a[i])
		}
	}
}

// vecTileBytes bounds the activations of one tile of tokens for the
// vector kernels, which read the whole tile for every eight rows: half of
// an L2 cache, so that the tile stays there while the rows stream past.
const vecTileBytes = 1 << 20

// vecChunk is the number of columns the vector prefill kernels take at a
// time: 8 decoded rows of vecChunk float32s (16 KiB) stay in the L1 cache
// while the tokens' columns stream past them.
const vecChunk = 512

// maxFastScale is the largest UE8M0 scale the FP8 routines take: they
// multiply the e4m3 value, decoded as an IEEE half times 2^-8, by
// 2^(s-119), a normal float32 up to s = 246. Larger scales (and the NaN
// scale 255) go through the portable decoder.
const maxFastScale = 246

// fp8Range is a range [lo, hi] of UE8M0 scale bytes.
type fp8Range struct{ lo, hi int }

// fp8XRange returns the scales s for which the one-token FP8 row loops may
// multiply the activations x, rather than each weight, by the block's
// multiplier 2^(s-119) and still round every product-sum as dot4 does:
// those for which every x[k]·2^(s-119) is exact (a normal float32 or zero),
// at most maxFastScale. Empty if x holds an infinity or a NaN.
func fp8XRange(x []float32) fp8Range { return fp8RangeOf(absRangeGo(x)) }

// absRangeGo returns the smallest nonzero (math.MaxUint32 if none) and the
// largest of the magnitudes' bits of x, which order as the magnitudes do.
func absRangeGo(x []float32) (lo, hi uint32) {
	lo = math.MaxUint32
	for _, v := range x {
		a := math.Float32bits(v) &^ (1 << 31)
		if a != 0 {
			lo = min(lo, a)
		}
		hi = max(hi, a)
	}
	return lo, hi
}

// fp8RangeOf is fp8XRange from absRangeGo's figures.
func fp8RangeOf(lo, hi uint32) fp8Range {
	r := fp8Range{0, maxFastScale}
	switch {
	case hi >= 0x7f800000: // an infinity or a NaN
		return fp8Range{1, 0}
	case hi == 0:
		return r
	}
	// lo ≥ 2^(el-1) and hi < 2^eh: lo·2^(s-119) is normal once
	// el-1+s-119 ≥ -126, and hi·2^(s-119) finite while eh+s-119 ≤ 128.
	_, el := math.Frexp(float64(math.Float32frombits(lo)))
	_, eh := math.Frexp(float64(math.Float32frombits(hi)))
	r.lo = max(r.lo, -6-el)
	r.hi = min(r.hi, 247-eh)
	return r
}
