package cuda

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// Matrix is a weight matrix in device memory, in the stored format of
// compute.Matrix (same layouts: row-major data, UE8M0 scales).
type Matrix struct {
	DType                compute.DType
	Rows, Cols           int
	BlockRows, BlockCols int // FP8 scale blocks
	Data, Scale          Ptr
	NaNFree              bool
	bytes                int64
}

// Bytes is the number of bytes of weights and scales a pass over the
// matrix reads.
func (m *Matrix) Bytes() int64 { return m.bytes }

// UploadMatrix copies m (validated) to new device memory on stream s.
func (t *Thread) UploadMatrix(m *compute.Matrix, s Stream) (*Matrix, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("cuda: UploadMatrix: %w", err)
	}
	d := &Matrix{DType: m.DType, Rows: m.Rows, Cols: m.Cols, BlockRows: m.BlockRows, BlockCols: m.BlockCols,
		NaNFree: m.NaNFree, bytes: m.Bytes()}
	var err error
	if d.Data, err = t.Alloc(int64(len(m.Data))); err != nil {
		return nil, err
	}
	if err = t.CopyToDevice(d.Data, m.Data, s); err == nil && len(m.Scale) > 0 {
		if d.Scale, err = t.Alloc(int64(len(m.Scale))); err == nil {
			err = t.CopyToDevice(d.Scale, m.Scale, s)
		}
	}
	if err != nil {
		t.FreeMatrix(d)
		return nil, err
	}
	return d, nil
}

// FreeMatrix frees the device memory of m.
func (t *Thread) FreeMatrix(m *Matrix) error {
	err := t.Free(m.Data)
	if e := t.Free(m.Scale); err == nil {
		err = e
	}
	m.Data, m.Scale = 0, 0
	return err
}

// rowBytes is the size of one row of m's data.
func (m *Matrix) rowBytes() int64 {
	switch m.DType {
	case compute.F32:
		return 4 * int64(m.Cols)
	case compute.BF16, compute.F16:
		return 2 * int64(m.Cols)
	case compute.FP8:
		return int64(m.Cols)
	default:
		return int64(m.Cols) / 2
	}
}

// vec reports whether the kernels may read m's rows with 16-byte loads:
// every row starts 16-byte aligned, and an FP8 scale block is a whole
// number of 16-column chunks.
func (m *Matrix) vec() bool {
	if m.rowBytes()%16 != 0 {
		return false
	}
	return m.DType != compute.FP8 || m.BlockCols%16 == 0
}

func (m *Matrix) scaleCols() int {
	if m.DType != compute.FP8 {
		return 0
	}
	return (m.Cols + m.BlockCols - 1) / m.BlockCols
}
