package comm

import (
	"unsafe"

	"github.com/strata-inference/strata/compute"
)

// reduce combines the ranks' F32 or I32 buffers (in the machine's byte
// order, as the backends hold them) elementwise, in rank order:
// ((parts[0] op parts[1]) op parts[2]) ….
func reduce(dt compute.DType, op Op, parts [][]byte) []byte {
	out := make([]byte, len(parts[0]))
	copy(out, parts[0])
	n := len(out) / 4
	if n == 0 {
		return out
	}
	for _, p := range parts[1:] {
		if dt == compute.F32 {
			reduceInto(unsafe.Slice((*float32)(unsafe.Pointer(&out[0])), n), unsafe.Slice((*float32)(unsafe.Pointer(&p[0])), n), op)
		} else {
			reduceInto(unsafe.Slice((*int32)(unsafe.Pointer(&out[0])), n), unsafe.Slice((*int32)(unsafe.Pointer(&p[0])), n), op)
		}
	}
	return out
}

func reduceInto[T float32 | int32](acc, x []T, op Op) {
	for i, v := range x {
		switch op {
		case Sum:
			acc[i] += v
		case Max:
			acc[i] = max(acc[i], v)
		case Min:
			acc[i] = min(acc[i], v)
		}
	}
}
