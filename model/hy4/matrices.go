package hy4

import "github.com/strata-inference/strata/compute"

// The forward pass reads some checkpoint matrices rearranged, all in
// their stored (unquantized) dtype, values unchanged: kv_a_proj_with_mqa
// split into its latent and RoPE-key rows, kv_b_proj split per head into
// the key block (transposed, absorbed into the query) and the value
// block, and the RoPE rows of every projection that feeds a rotation
// reordered (ropeOrder).

// elemBytes is the size of one element of an unquantized matrix.
func elemBytes(m *compute.Matrix) int { return len(m.Data) / (m.Rows * m.Cols) }

// rowBlock returns rows [lo, lo+n) of m, sharing its memory.
func rowBlock(m *compute.Matrix, lo, n int) *compute.Matrix {
	if m == nil {
		return nil
	}
	rb := len(m.Data) / m.Rows
	return &compute.Matrix{DType: m.DType, Rows: n, Cols: m.Cols, Data: m.Data[lo*rb : (lo+n)*rb]}
}

// permutedRows returns the matrix whose row i is row perm[i] of m.
func permutedRows(m *compute.Matrix, perm []int) *compute.Matrix {
	if m == nil {
		return nil
	}
	rb := len(m.Data) / m.Rows
	out := &compute.Matrix{DType: m.DType, Rows: len(perm), Cols: m.Cols, Data: make([]byte, len(perm)*rb)}
	for i, j := range perm {
		copy(out.Data[i*rb:(i+1)*rb], m.Data[j*rb:(j+1)*rb])
	}
	return out
}

// permuted returns v reordered: element i is v[perm[i]].
func permuted(v []float32, perm []int) []float32 {
	if v == nil {
		return nil
	}
	out := make([]float32, len(perm))
	for i, j := range perm {
		out[i] = v[j]
	}
	return out
}

// transposedRows returns rows [lo, lo+n) of m transposed: an m.Cols×n
// matrix.
func transposedRows(m *compute.Matrix, lo, n int) *compute.Matrix {
	es, cols := elemBytes(m), m.Cols
	out := &compute.Matrix{DType: m.DType, Rows: cols, Cols: n, Data: make([]byte, n*cols*es)}
	for i := range n {
		for j := range cols {
			copy(out.Data[(j*n+i)*es:(j*n+i+1)*es], m.Data[((lo+i)*cols+j)*es:((lo+i)*cols+j+1)*es])
		}
	}
	return out
}

// ropeOrder is the permutation of groups groups of width w each whose
// last r channels are rotated rotate-half (channel j with j + r/2, spec
// §3) that makes them rotate as interleaved pairs (2j, 2j+1), the
// pairing of the backend's RoPE: within a group, position w-r+2j takes
// channel w-r+j and position w-r+2j+1 channel w-r+r/2+j; the other
// channels stay. Rotating the reordered vector interleaved and the
// original rotate-half give the same values in the new order; every
// dot product between two vectors reordered alike is unchanged.
func ropeOrder(groups, w, r int) []int {
	perm := make([]int, 0, groups*w)
	for g := range groups {
		base := g * w
		for i := range w - r {
			perm = append(perm, base+i)
		}
		for j := range r / 2 {
			perm = append(perm, base+w-r+j, base+w-r+r/2+j)
		}
	}
	return perm
}
