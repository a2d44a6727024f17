package compute

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// littleEndian reports whether float32s in memory are laid out as F32
// matrices store them.
func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// F32View is a row-major rows×cols F32 matrix over v, for activations a
// kernel should treat as weights (attention keys). On little-endian
// machines it shares v's memory; elsewhere it copies.
func F32View(v []float32, rows, cols int) *Matrix {
	v = v[:rows*cols]
	var data []byte
	if littleEndian() && len(v) > 0 {
		data = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	} else {
		data = make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
		}
	}
	return &Matrix{DType: F32, Rows: rows, Cols: cols, Data: data}
}
