// Package compute defines what a device provides to the forward passes: memory
// it owns (weights, activations, scratch, the cache pool), addressed through
// Tensors, and the ops on them, behind one Backend interface.
//
// Weights stay in their stored format (F32, BF16, F16, FP8 e4m3 with 128x128
// UE8M0 block scales, packed FP4 e2m1 with one UE8M0 scale per 32 input
// columns); a Backend dequantizes inside its matmul. Activations are float32,
// row-major: a batch of T vectors of width n is a T×n F32 tensor. Positions,
// page tables and index lists are I32 tensors; cache pages are U8.
//
// Ops are coarse where a kernel must see several steps at once to be fast
// (sparse attention over a paged ring and compressed entries, the compressor
// update, indexer scoring and top-k, hyper-connection mixing with Sinkhorn,
// MoE routing with grouped expert products): each is one Backend method that
// every backend implements, the CPU backend's version being the readable
// reference.
package compute

import "fmt"

// DType is the stored format of a weight matrix.
type DType int

const (
	F32  DType = iota // little-endian IEEE float32
	BF16              // bfloat16, 2 bytes per value
	F16               // IEEE half, 2 bytes per value
	FP8               // e4m3fn bytes; Scale holds one UE8M0 byte per BlockRows x BlockCols block
	FP4               // e2m1 nibbles, two per byte, low nibble = even column; Scale holds one UE8M0 byte per 32 columns of a row
	I32               // int32 (positions, page tables, indices)
	U8                // bytes (cache pages)
)

// Size is the bytes per element; 0 for FP4, whose elements are half a byte.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case BF16, F16:
		return 2
	case FP8, U8:
		return 1
	}
	return 0
}

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case F16:
		return "f16"
	case FP8:
		return "fp8-e4m3"
	case FP4:
		return "fp4-e2m1"
	case I32:
		return "i32"
	case U8:
		return "u8"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// FP4GroupSize is the number of consecutive input columns sharing one scale in FP4 matrices.
const FP4GroupSize = 32

// Matrix is a weight matrix W of Rows outputs by Cols inputs, stored row-major in
// its checkpoint format. Data usually points into a memory-mapped checkpoint.
type Matrix struct {
	DType      DType
	Rows, Cols int
	Data       []byte
	// Scale is the block-scale tensor of FP8 and FP4 matrices, as UE8M0 bytes
	// (value 2^(b-127)). FP8: [ceil(Rows/BlockRows), ceil(Cols/BlockCols)].
	// FP4: [Rows, Cols/32].
	Scale []byte
	// BlockRows and BlockCols are the FP8 scale block (128x128 in released checkpoints).
	BlockRows, BlockCols int
	// NaNFree promises that an FP8 matrix's Data holds no NaN code (0x7F,
	// 0xFF), so kernels may skip checking each row for one. Whoever binds
	// the weights checks once and sets it.
	NaNFree bool
	// Resident is the backend's own copy of the matrix, set by
	// Backend.Upload for backends that compute away from host memory (nil
	// for the CPU, which reads Data in place).
	Resident any
}

// Bytes is the number of bytes of weights and scales a full pass over W reads.
func (m *Matrix) Bytes() int64 { return int64(len(m.Data)) + int64(len(m.Scale)) }

// Validate checks that Data and Scale have the lengths the shape and dtype imply.
func (m *Matrix) Validate() error {
	if m.Rows <= 0 || m.Cols <= 0 {
		return fmt.Errorf("compute: matrix shape %dx%d is empty", m.Rows, m.Cols)
	}
	n := m.Rows * m.Cols
	var want, wantScale int
	switch m.DType {
	case F32:
		want = 4 * n
	case BF16, F16:
		want = 2 * n
	case FP8:
		if m.BlockRows <= 0 || m.BlockCols <= 0 {
			return fmt.Errorf("compute: fp8 matrix %dx%d has block %dx%d", m.Rows, m.Cols, m.BlockRows, m.BlockCols)
		}
		want = n
		wantScale = ceilDiv(m.Rows, m.BlockRows) * ceilDiv(m.Cols, m.BlockCols)
	case FP4:
		if m.Cols%FP4GroupSize != 0 {
			return fmt.Errorf("compute: fp4 matrix %dx%d: columns not a multiple of %d", m.Rows, m.Cols, FP4GroupSize)
		}
		want = n / 2
		wantScale = m.Rows * m.Cols / FP4GroupSize
	default:
		return fmt.Errorf("compute: unknown dtype %v", m.DType)
	}
	if len(m.Data) != want {
		return fmt.Errorf("compute: %v matrix %dx%d has %d data bytes, want %d", m.DType, m.Rows, m.Cols, len(m.Data), want)
	}
	if len(m.Scale) != wantScale {
		return fmt.Errorf("compute: %v matrix %dx%d has %d scale bytes, want %d", m.DType, m.Rows, m.Cols, len(m.Scale), wantScale)
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
