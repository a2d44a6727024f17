package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// Tensor is one tensor of an open File.
type Tensor struct {
	Name  string
	DType DType
	Shape []int // empty for a scalar; the caller may modify this copy
	// Data holds the little-endian elements in row-major order. It aliases
	// the file mapping: it is read-only (writing to it faults on Unix) and
	// is invalid once the File is closed. Its capacity equals its length.
	// The data buffer starts 8-byte aligned in files written by Write or the
	// reference implementation, but Data is only as aligned as its offset:
	// check before reinterpreting it in place.
	Data []byte
	File string // path of the file the tensor is stored in
}

// NumElements returns the product of the dimensions of the shape (1 for a scalar).
func (t Tensor) NumElements() int { return numElements(t.Shape) }

// File is an open safetensors file. Its methods may be called concurrently,
// except Close, which must not run concurrently with any other use of the
// File or of the tensor data it returned.
type File struct {
	path   string
	mem    []byte // the whole file, mapped or read
	data   []byte // the data buffer, mem[8+N:]
	hdr    *Header
	byName map[string]int // index into hdr.Tensors
	unmap  func() error   // releases mem; nil once closed
}

// Open opens and validates the safetensors file at path. On Unix it maps the
// file read-only and shared (the file must not be truncated or modified while
// it is open: on Unix that may fault the process); elsewhere it reads the
// whole file into memory. See ParseHeader for what a valid header is.
func Open(path string) (*File, error) {
	mem, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := newFile(path, mem)
	if err != nil {
		unmap()
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

// newFile validates the file contents mem of path.
func newFile(path string, mem []byte) (*File, error) {
	p := prefix(path)
	size := int64(len(mem))
	if size < 8 {
		return nil, fmt.Errorf("%sfile is %d bytes, too short for the 8-byte header length", p, size)
	}
	n := binary.LittleEndian.Uint64(mem)
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("%sheader length %d exceeds the limit of %d", p, n, MaxHeaderSize)
	}
	if n > uint64(size-8) {
		return nil, fmt.Errorf("%sheader length %d exceeds the %d bytes after the length field", p, n, size-8)
	}
	hdr, err := parseHeader(path, mem[8:8+n], size-8-int64(n))
	if err != nil {
		return nil, err
	}
	f := &File{
		path:   path,
		mem:    mem,
		data:   mem[8+n:],
		hdr:    hdr,
		byName: make(map[string]int, len(hdr.Tensors)),
	}
	for i, t := range hdr.Tensors {
		f.byName[t.Name] = i
	}
	return f, nil
}

// Path returns the path the File was opened with.
func (f *File) Path() string { return f.path }

// Header returns the validated header. The caller must not modify it.
func (f *File) Header() *Header { return f.hdr }

// Names returns the tensor names of the file in sorted order.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.byName))
	for n := range f.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Tensor returns the tensor called name, or false if the file has no such
// tensor or is closed.
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, false
	}
	ti := &f.hdr.Tensors[i]
	return Tensor{
		Name:  ti.Name,
		DType: ti.DType,
		Shape: append([]int{}, ti.Shape...),
		Data:  f.data[ti.Begin:ti.End:ti.End],
		File:  f.path,
	}, true
}

// Close releases the file's memory. Tensor data obtained from f must not be
// used afterwards. Closing a closed File does nothing.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	unmap := f.unmap
	f.unmap, f.mem, f.data, f.byName = nil, nil, nil, nil
	if err := unmap(); err != nil {
		return fmt.Errorf("safetensors: %s: %w", f.path, err)
	}
	return nil
}

// intSize reports whether n bytes can be held in one []byte.
func intSize(n int64) bool { return n >= 0 && n <= math.MaxInt }
