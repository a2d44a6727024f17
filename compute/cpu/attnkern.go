package cpu

import (
	"unsafe"

	"github.com/strata-inference/strata/compute"
)

// The leaves of attention and of the lightning indexer. Keys are read in
// place (rows of float32s in the cache's pages, or this step's vectors)
// through pointers, four at a time; every value they compute depends on
// its own key and query alone, so the ops are batch-invariant however the
// keys are grouped and the work is split.
//
// Like the matmul kernels, the families round differently: the vector
// families (AVX-512 and AVX2, the same bits) fuse multiply-adds, the
// portable family rounds every product before adding it.

// keyMatrix describes a row of d float32s for dot4 (which reads only
// DType and Cols): a key is multiplied like a row of an F32 matrix.
func keyMatrix(d int) compute.Matrix { return compute.Matrix{DType: compute.F32, Rows: 1, Cols: d} }

// keyRows points r at the four keys of d float32s at p.
func keyRows(r *row4, p *[4]unsafe.Pointer, d int) {
	for i := range r.w {
		r.w[i] = unsafe.Slice((*byte)(p[i]), 4*d)
	}
}

// accKeys adds Σ_i p[i]·key_i to y, key_i being the len(y) float32s at
// keys[i] (len(p) == len(keys) <= 4): each element of y is one chain over
// the keys in order. The vector families fuse the multiply-adds of the
// first len(y)&^15 elements and round the products of the rest, as the
// portable family does everywhere.
func (k *kernelSet) accKeys(y, p []float32, keys []unsafe.Pointer) {
	d := len(y)
	from := 0
	if k.vector && d >= 16 {
		n := d &^ 15
		if len(keys) == 4 {
			k.vec.accRows4(&y[0], (*[4]float32)(p[:4]), (*[4]unsafe.Pointer)(keys[:4]), n)
		} else {
			for i := range keys {
				k.vec.accRow1(&y[0], &p[i], keys[i], n)
			}
		}
		from = n
	}
	if from < d {
		accKeysGo(y, p, keys, from)
	}
}

// accKeysGo is accKeys for columns [from, len(y)), products rounded.
func accKeysGo(y, p []float32, keys []unsafe.Pointer, from int) {
	d := len(y)
	for i, kp := range keys {
		w := p[i]
		key := unsafe.Slice((*float32)(kp), d)[from:]
		yy := y[from:]
		yy = yy[:len(key)]
		for j, v := range key {
			yy[j] = yy[j] + float32(w*v)
		}
	}
}

// idxDots adds the indexer terms of four keys to acc (see vecAsm.idxDots:
// blocks·16 heads, qt the queries transposed with row stride qs, c the
// heads' weights). The portable family computes the same sums with every
// product rounded.
func (k *kernelSet) idxDots(acc *[4]lanes, keys *[4]unsafe.Pointer, qt []float32, qs int, c []float32, dim, blocks int, d *lanes) {
	if k.vector {
		k.vec.idxDots(acc, keys, qt, qs, c, dim, blocks)
		return
	}
	idxDotsGo(acc, keys, qt, qs, c, dim, blocks, d)
}

// idxDotsGo is the portable idxDots; d is scratch.
func idxDotsGo(acc *[4]lanes, keys *[4]unsafe.Pointer, qt []float32, qs int, c []float32, dim, blocks int, d *lanes) {
	for i, kp := range keys {
		key := unsafe.Slice((*float32)(kp), dim)
		for b := range blocks {
			*d = lanes{}
			for kk, kv := range key {
				row := (*lanes)(qt[kk*qs+16*b : kk*qs+16*b+16])
				for l := range d {
					d[l] = d[l] + float32(kv*row[l])
				}
			}
			cb := (*lanes)(c[16*b : 16*b+16])
			for l, v := range d {
				var r float32
				if v > 0 {
					r = v
				}
				acc[i][l] = acc[i][l] + float32(r*cb[l])
			}
		}
	}
}
