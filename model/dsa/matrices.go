package dsa

import (
	"encoding/binary"
	"math"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// The forward pass reads some checkpoint matrices in pieces: the latent
// and RoPE rows of kv_a_proj_with_mqa, and kv_b_proj split per head into
// the key part (transposed, for absorbing it into the query) and the value
// part. The pieces keep the stored values exactly: rows of unquantized
// matrices share the checkpoint's memory; rearranged values keep their
// dtype, and FP8 values (e4m3 times a power of two) become bf16, which
// holds them exactly (float32 in the rare case it does not).

// rowBlock returns rows [lo, lo+n) of m. Unquantized rows and FP8 rows
// starting on a scale block share m's memory; other FP8 rows are decoded.
func rowBlock(m *compute.Matrix, lo, n int) *compute.Matrix {
	if m == nil {
		return nil
	}
	rowBytes := len(m.Data) / m.Rows
	out := &compute.Matrix{DType: m.DType, Rows: n, Cols: m.Cols, Data: m.Data[lo*rowBytes : (lo+n)*rowBytes], BlockRows: m.BlockRows, BlockCols: m.BlockCols, NaNFree: m.NaNFree}
	if m.DType == compute.FP8 {
		if lo%m.BlockRows != 0 {
			return fromValues(rowValues(m, lo, n), n, m.Cols, m.DType)
		}
		bc := ceilDiv(m.Cols, m.BlockCols)
		out.Scale = m.Scale[lo/m.BlockRows*bc : ceilDiv(lo+n, m.BlockRows)*bc]
	}
	return out
}

// transposedRows returns rows [lo, lo+n) of m transposed: an m.Cols×n
// matrix.
func transposedRows(m *compute.Matrix, lo, n int) *compute.Matrix {
	v := rowValues(m, lo, n)
	cols := m.Cols
	t := make([]float32, len(v))
	for i := range n {
		for j := range cols {
			t[j*n+i] = v[i*cols+j]
		}
	}
	return fromValues(t, cols, n, m.DType)
}

// rowValues decodes rows [lo, lo+n) of m.
func rowValues(m *compute.Matrix, lo, n int) []float32 {
	cols := m.Cols
	out := make([]float32, n*cols)
	le := binary.LittleEndian
	for r := range n {
		row, dst := lo+r, out[r*cols:(r+1)*cols]
		switch m.DType {
		case compute.F32:
			for j := range dst {
				dst[j] = math.Float32frombits(le.Uint32(m.Data[4*(row*cols+j):]))
			}
		case compute.BF16:
			for j := range dst {
				dst[j] = quant.BF16ToFloat32(le.Uint16(m.Data[2*(row*cols+j):]))
			}
		case compute.F16:
			for j := range dst {
				dst[j] = quant.F16ToFloat32(le.Uint16(m.Data[2*(row*cols+j):]))
			}
		case compute.FP8:
			bc := ceilDiv(cols, m.BlockCols)
			for j := range dst {
				s := quant.UE8M0ToFloat32(m.Scale[row/m.BlockRows*bc+j/m.BlockCols])
				dst[j] = quant.E4M3ToFloat32(m.Data[row*cols+j]) * s
			}
		default:
			panic("dsa: rows of a " + m.DType.String() + " matrix")
		}
	}
	return out
}

// fromValues stores v as a rows×cols matrix in dtype like (bf16 for FP8
// values, float32 where bf16 would round one).
func fromValues(v []float32, rows, cols int, like compute.DType) *compute.Matrix {
	dt := like
	if dt == compute.FP8 {
		dt = compute.BF16
		for _, x := range v {
			if quant.BF16ToFloat32(quant.Float32ToBF16(x)) != x {
				dt = compute.F32
				break
			}
		}
	}
	m := &compute.Matrix{DType: dt, Rows: rows, Cols: cols}
	le := binary.LittleEndian
	switch dt {
	case compute.F32:
		m.Data = make([]byte, 4*len(v))
		for i, x := range v {
			le.PutUint32(m.Data[4*i:], math.Float32bits(x))
		}
	case compute.BF16:
		m.Data = make([]byte, 2*len(v))
		for i, x := range v {
			le.PutUint16(m.Data[2*i:], quant.Float32ToBF16(x))
		}
	case compute.F16:
		m.Data = make([]byte, 2*len(v))
		for i, x := range v {
			le.PutUint16(m.Data[2*i:], quant.Float32ToF16(x))
		}
	}
	return m
}
