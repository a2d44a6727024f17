package compute

import "fmt"

// Buffer is a region of memory a Backend allocated (host memory for the
// CPU, device memory for a GPU). Only the Backend that made it reads or
// writes it; everything above compute handles it through Tensors.
type Buffer interface {
	// Bytes is the size of the region.
	Bytes() int64
}

// Tensor is a view of a Buffer: Rows rows of Cols elements of DT, row-major,
// starting Off bytes into Buf. A Tensor is a value: views are made by
// slicing rows or reinterpreting the shape, never by copying. The zero
// Tensor means "none" where an op takes an optional argument.
type Tensor struct {
	Buf        Buffer
	Off        int64
	DT         DType
	Rows, Cols int
}

// Valid reports whether t names memory (the zero Tensor does not).
func (t Tensor) Valid() bool { return t.Buf != nil }

// Len is the number of elements.
func (t Tensor) Len() int { return t.Rows * t.Cols }

// Bytes is the number of bytes the view covers.
func (t Tensor) Bytes() int64 { return int64(t.Len()) * int64(t.DT.Size()) }

// RowBytes is the byte stride between rows.
func (t Tensor) RowBytes() int64 { return int64(t.Cols) * int64(t.DT.Size()) }

// Slice returns rows [a, b) of t.
func (t Tensor) Slice(a, b int) Tensor {
	if a < 0 || b < a || b > t.Rows {
		panic(fmt.Sprintf("compute: rows [%d, %d) of a tensor of %d rows", a, b, t.Rows))
	}
	return Tensor{Buf: t.Buf, Off: t.Off + int64(a)*t.RowBytes(), DT: t.DT, Rows: b - a, Cols: t.Cols}
}

// Row returns row i of t as a one-row tensor.
func (t Tensor) Row(i int) Tensor { return t.Slice(i, i+1) }

// Reshape views the same elements as rows×cols.
func (t Tensor) Reshape(rows, cols int) Tensor {
	if rows*cols != t.Len() {
		panic(fmt.Sprintf("compute: reshape of %d×%d into %d×%d", t.Rows, t.Cols, rows, cols))
	}
	t.Rows, t.Cols = rows, cols
	return t
}

// Flat views t as one row.
func (t Tensor) Flat() Tensor { return t.Reshape(1, t.Len()) }

// Elems returns elements [a, b) of t's flat view as one row.
func (t Tensor) Elems(a, b int) Tensor {
	n := t.Len()
	if a < 0 || b < a || b > n {
		panic(fmt.Sprintf("compute: elements [%d, %d) of a tensor of %d", a, b, n))
	}
	return Tensor{Buf: t.Buf, Off: t.Off + int64(a)*int64(t.DT.Size()), DT: t.DT, Rows: 1, Cols: b - a}
}

func (t Tensor) String() string {
	return fmt.Sprintf("%v[%d×%d]@%d", t.DT, t.Rows, t.Cols, t.Off)
}

// As reinterprets t's bytes as one row of dt (whose size must divide them).
func (t Tensor) As(dt DType) Tensor {
	n := t.Bytes()
	if dt.Size() == 0 || n%int64(dt.Size()) != 0 {
		panic(fmt.Sprintf("compute: %d bytes viewed as %v", n, dt))
	}
	return Tensor{Buf: t.Buf, Off: t.Off, DT: dt, Rows: 1, Cols: int(n / int64(dt.Size()))}
}
