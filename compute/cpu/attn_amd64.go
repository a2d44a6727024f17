package cpu

import "unsafe"

// accRows4 adds w[i]·rows[i][j] to y[j] for j < n (a multiple of 16), for
// i = 0, 1, 2, 3 in that order, each with a fused multiply-add.
func (a vecAsm) accRows4(y *float32, w *[4]float32, rows *[4]unsafe.Pointer, n int) {
	if a.z {
		accRows4Z(y, w, rows, n)
	} else {
		accRows4Y(y, w, rows, n)
	}
}

// accRow1 is accRows4 for one row.
func (a vecAsm) accRow1(y *float32, w *float32, row unsafe.Pointer, n int) {
	if a.z {
		accRow1Z(y, w, row, n)
	} else {
		accRow1Y(y, w, row, n)
	}
}

// idxDots adds to acc[i] the indexer terms of key i (dim float32s at
// keys[i]) for blocks·16 heads: for head block b, in increasing b, the 16
// dots d_h = Σ_k key[k]·qt[k·qs+h] (one fused multiply-add chain in k
// order, from zero) become max(d_h, 0)·c[h], added lane by lane.
func (a vecAsm) idxDots(acc *[4]lanes, keys *[4]unsafe.Pointer, qt []float32, qs int, c []float32, dim, blocks int) {
	if dim <= 0 {
		return
	}
	_ = qt[(dim-1)*qs+16*blocks-1]
	_ = c[16*blocks-1]
	b := 0
	for ; b+4 <= blocks; b += 4 {
		if a.z {
			idxDots4x4Z(acc, keys, &qt[16*b], qs, &c[16*b], dim)
		} else {
			idxDots4x4Y(acc, keys, &qt[16*b], qs, &c[16*b], dim)
		}
	}
	for ; b < blocks; b++ {
		if a.z {
			idxDots4x1Z(acc, keys, &qt[16*b], qs, &c[16*b], dim)
		} else {
			idxDots4x1Y(acc, keys, &qt[16*b], qs, &c[16*b], dim)
		}
	}
}
