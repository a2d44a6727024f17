// Package compute defines the kernels the model forward passes need, behind one
// Backend interface, and the in-memory weight matrix descriptor they read.
//
// Weights stay in their stored format (F32, BF16, F16, FP8 e4m3 with 128x128
// UE8M0 block scales, packed FP4 e2m1 with one UE8M0 scale per 32 input
// columns); a Backend dequantizes inside its matmul. Activations are float32,
// row-major: a batch of T vectors of width n is a []float32 of length T*n.
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
)

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

// Backend runs the kernels of a forward pass. All slices are float32 row-major;
// a Backend may use several goroutines inside a call but returns only when the
// result is complete. Implementations must be safe for use by one caller at a time.
type Backend interface {
	// MatMul computes y[t] = W · x[t] for t in [0, T): x is [T, W.Cols], y is [T, W.Rows].
	// It is batch-invariant: y[t] is the same, bit for bit, whatever T and
	// the other rows of x are, so that batched, chunked, cached and
	// speculative paths reproduce one-token decoding exactly.
	MatMul(y, x []float32, T int, w *Matrix)
	// RMSNorm computes y[t] = w ⊙ x[t] / sqrt(mean(x[t]²) + eps) for T rows of width n;
	// a nil w means no weight (unweighted). y may alias x.
	RMSNorm(y, x, w []float32, T, n int, eps float32)
	// RoPE rotates, in every row of x (T rows of width n), the interleaved pairs
	// (2i, 2i+1) of the last 2*len(invFreq) channels by angle pos[t]*invFreq[i]
	// (computed in float32 as in the reference), by its negative when inverse is set.
	RoPE(x []float32, T, n int, pos []int32, invFreq []float32, inverse bool)
	// Softmax replaces each of T rows of width n by its softmax.
	Softmax(x []float32, T, n int)
	// TopK writes into idx the indices of the k largest values of x (k <= len(x)),
	// largest first; ties go to the lower index.
	TopK(idx []int32, x []float32, k int)
}
