package cpu

import (
	"fmt"
	"unsafe"

	"github.com/strata-inference/strata/compute"
)

// buffer is host memory, kept as float32s so that every tensor's elements
// are 4-byte aligned; I32 and U8 tensors view the same words.
type buffer struct{ f []float32 }

func (b *buffer) Bytes() int64 { return 4 * int64(len(b.f)) }

func newBuffer(bytes int64) *buffer { return &buffer{f: make([]float32, (bytes+3)/4)} }

// words is the float32s of t's memory; t must start on a 4-byte boundary.
func words(t compute.Tensor, n int) []float32 {
	buf, ok := t.Buf.(*buffer)
	if !ok {
		panic(fmt.Sprintf("cpu: a %T tensor is not this backend's", t.Buf))
	}
	if t.Off%4 != 0 {
		panic(fmt.Sprintf("cpu: %v tensor at byte %d is not 4-byte aligned", t.DT, t.Off))
	}
	o := int(t.Off / 4)
	return buf.f[o : o+n : o+n]
}

// F32 returns the elements of an F32 tensor in place.
func F32(t compute.Tensor) []float32 {
	if t.DT != compute.F32 {
		panic(fmt.Sprintf("cpu: %v tensor read as f32", t.DT))
	}
	return words(t, t.Len())
}

// I32 returns the elements of an I32 tensor in place.
func I32(t compute.Tensor) []int32 {
	if t.DT != compute.I32 {
		panic(fmt.Sprintf("cpu: %v tensor read as i32", t.DT))
	}
	w := words(t, t.Len())
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(w))), len(w))
}

// Bytes returns the bytes of any tensor in place.
func Bytes(t compute.Tensor) []byte {
	buf, ok := t.Buf.(*buffer)
	if !ok {
		panic(fmt.Sprintf("cpu: a %T tensor is not this backend's", t.Buf))
	}
	all := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf.f))), 4*len(buf.f))
	n := t.Bytes()
	return all[t.Off : t.Off+n : t.Off+n]
}

// tensorOf wraps host memory as a tensor.
func tensorOf(f []float32, dt compute.DType, rows, cols int) compute.Tensor {
	return compute.Tensor{Buf: &buffer{f: f}, DT: dt, Rows: rows, Cols: cols}
}

// Wrap returns an F32 tensor over v's memory (rows×cols), for tests and
// tools that hold host data.
func Wrap(v []float32, rows, cols int) compute.Tensor {
	if len(v) < rows*cols {
		panic(fmt.Sprintf("cpu: wrapping %d values as %d×%d", len(v), rows, cols))
	}
	return tensorOf(v[:rows*cols], compute.F32, rows, cols)
}

// WrapI32 returns an I32 tensor over v's memory.
func WrapI32(v []int32, rows, cols int) compute.Tensor {
	if len(v) < rows*cols {
		panic(fmt.Sprintf("cpu: wrapping %d values as %d×%d", len(v), rows, cols))
	}
	var f []float32
	if len(v) > 0 {
		f = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(v))), rows*cols)
	}
	return tensorOf(f, compute.I32, rows, cols)
}

func sizeOf(dt compute.DType, rows, cols int) int64 {
	if dt.Size() == 0 {
		panic(fmt.Sprintf("cpu: no tensors of %v", dt))
	}
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cpu: tensor of %d×%d", rows, cols))
	}
	return int64(rows) * int64(cols) * int64(dt.Size())
}

// Name implements compute.Memory.
func (b *Backend) Name() string { return "cpu" }

// Alloc implements compute.Memory.
func (b *Backend) Alloc(dt compute.DType, rows, cols int) (compute.Tensor, error) {
	n := sizeOf(dt, rows, cols)
	if n > 1<<46 {
		return compute.Tensor{}, fmt.Errorf("cpu: allocation of %d bytes", n)
	}
	return compute.Tensor{Buf: newBuffer(n), DT: dt, Rows: rows, Cols: cols}, nil
}

// Free implements compute.Memory; the garbage collector reclaims the memory.
func (b *Backend) Free(compute.Tensor) {}

// Upload implements compute.Memory: the CPU reads weights in place.
func (b *Backend) Upload(*compute.Matrix) error { return nil }

// Vector implements compute.Memory; it shares v's memory.
func (b *Backend) Vector(v []float32) (compute.Tensor, error) {
	return tensorOf(v, compute.F32, 1, len(v)), nil
}

// Write implements compute.Memory.
func (b *Backend) Write(dst compute.Tensor, src any) {
	switch s := src.(type) {
	case []float32:
		checkCount("Write", len(s), dst.Len())
		copy(F32(dst), s)
	case []int32:
		checkCount("Write", len(s), dst.Len())
		copy(I32(dst), s)
	case []byte:
		checkCount("Write", len(s), int(dst.Bytes()))
		copy(Bytes(dst), s)
	default:
		panic(fmt.Sprintf("cpu: Write from %T", src))
	}
}

// Read implements compute.Memory.
func (b *Backend) Read(dst any, src compute.Tensor) error {
	switch d := dst.(type) {
	case []float32:
		checkCount("Read", len(d), src.Len())
		copy(d, F32(src))
	case []int32:
		checkCount("Read", len(d), src.Len())
		copy(d, I32(src))
	case []byte:
		checkCount("Read", len(d), int(src.Bytes()))
		copy(d, Bytes(src))
	default:
		return fmt.Errorf("cpu: Read into %T", dst)
	}
	return nil
}

func checkCount(op string, got, want int) {
	if got != want {
		panic(fmt.Sprintf("cpu: %s of %d elements into a tensor of %d", op, got, want))
	}
}

// Copy implements compute.Memory.
func (b *Backend) Copy(dst, src compute.Tensor, regions []compute.Region) {
	d, s := Bytes(dst), Bytes(src)
	for _, r := range regions {
		copy(d[r.Dst:r.Dst+r.Bytes], s[r.Src:r.Src+r.Bytes])
	}
}

// Sync implements compute.Memory: CPU ops are done when they return.
func (b *Backend) Sync() error { return nil }

// scratch is a bump allocator for one step's temporaries: one slab, grown
// at a full reset to the most the last step held at once.
type scratch struct {
	slab *buffer
	off  int64 // logical bytes handed out since the last reset, whether in the slab or not
	peak int64 // the most off has reached since the last full reset
}

// scratchAlign keeps every scratch tensor on its own cache lines.
const scratchAlign = 64

// Scratch implements compute.Memory. The memory is zeroed.
func (b *Backend) Scratch(dt compute.DType, rows, cols int) compute.Tensor {
	s := &b.s.scratch
	n := sizeOf(dt, rows, cols)
	at := s.off
	s.off += (n + scratchAlign - 1) / scratchAlign * scratchAlign
	s.peak = max(s.peak, s.off)
	if s.slab != nil && at+n <= s.slab.Bytes() {
		t := compute.Tensor{Buf: s.slab, Off: at, DT: dt, Rows: rows, Cols: cols}
		clear(Bytes(t))
		return t
	}
	return compute.Tensor{Buf: newBuffer(n), DT: dt, Rows: rows, Cols: cols}
}

// ScratchMark implements compute.Memory.
func (b *Backend) ScratchMark() int64 { return b.s.scratch.off }

// ResetScratch implements compute.Memory.
func (b *Backend) ResetScratch(mark int64) {
	s := &b.s.scratch
	if mark > 0 {
		s.off = min(s.off, mark)
		return
	}
	if s.slab == nil || s.peak > s.slab.Bytes() {
		s.slab = newBuffer(s.peak)
	}
	s.off, s.peak = 0, 0
}

// scratchF32 is Scratch for host code of this package.
func (b *Backend) scratchF32(n int) []float32 {
	return F32(b.Scratch(compute.F32, 1, n))
}
