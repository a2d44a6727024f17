//go:build linux && (amd64 || arm64) && !nocuda

package nccl

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// dynamicLoading reports whether this build can load shared libraries.
const dynamicLoading = true

func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

// ccall calls the C function fn with integer and pointer arguments and
// returns its integer result. Pointers into Go memory must be converted in
// the call expression (uintptr(unsafe.Pointer(&v))), which keeps them
// alive.
//
//go:uintptrescapes
func ccall(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// cString returns a copy of the NUL-terminated C string at p.
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	b := (*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p)))
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(b), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(b, n))
}
