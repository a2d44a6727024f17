package cpu

import (
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// Kernels names a family of matmul kernels: the instruction set the
// dequantize-and-multiply leaves under MatMul are written for.
//
// Each family is batch-invariant on its own (a token's outputs are the same
// bits whatever T is and whatever the other rows are), but families round
// differently from one another: the portable kernels sum each row in one
// scalar chain per kChunk columns without fused multiply-adds (on amd64);
// the vector kernels (AVX-512 and AVX2, which compute exactly the same bits
// as each other) sum each row in 16 fused multiply-add chains, one per
// column modulo 16, reduced by a fixed tree.
type Kernels int

const (
	// KernelsAuto picks the fastest family the CPU runs: AVX-512, then
	// AVX2, then portable.
	KernelsAuto Kernels = iota
	// KernelsAVX512 needs AVX-512 F, BW, VL and DQ (amd64).
	KernelsAVX512
	// KernelsAVX2 needs AVX2, FMA and F16C (amd64).
	KernelsAVX2
	// KernelsPortable is plain Go, on every architecture: the reference the
	// vector kernels are tested against, whose arithmetic internal/regress
	// pins.
	KernelsPortable
	// KernelsAMX multiplies FP8, FP4 and BF16 weights on Intel AMX tiles
	// with activations rounded to bfloat16: a lossy mode, opt-in only (see
	// amx_linux_amd64.go for its numerics). It needs AMX-BF16 and AVX-512, on
	// Linux (amd64).
	KernelsAMX
)

func (k Kernels) String() string {
	switch k {
	case KernelsAuto:
		return "auto"
	case KernelsAVX512:
		return "avx512"
	case KernelsAVX2:
		return "avx2"
	case KernelsPortable:
		return "portable"
	case KernelsAMX:
		return "amx-bf16"
	}
	return fmt.Sprintf("Kernels(%d)", int(k))
}

// Available reports whether the CPU runs the family k (always for
// KernelsAuto and KernelsPortable).
func (k Kernels) Available() bool {
	switch k {
	case KernelsAuto, KernelsPortable:
		return true
	case KernelsAVX512:
		return hasAVX512
	case KernelsAVX2:
		return hasAVX2
	case KernelsAMX:
		return amxOK
	}
	return false
}

// SetKernels makes the backend's matmuls use the family k (KernelsAuto
// resolves to the fastest available). It fails, leaving the backend as it
// was, when the CPU lacks the instructions k needs. It must not be called
// concurrently with the backend's other methods.
func (b *Backend) SetKernels(k Kernels) error {
	if !k.Available() {
		return fmt.Errorf("cpu: SetKernels: this CPU (%s) cannot run the %v kernels", cpuName(), k)
	}
	b.s.k = kernelsFor(k)
	return nil
}

// Kernels returns the family the backend's matmuls use (never KernelsAuto).
func (b *Backend) Kernels() Kernels { return b.s.k.family }

// kernelsFor returns the kernel set of the family k, which must be
// available.
func kernelsFor(k Kernels) *kernelSet {
	if k == KernelsAuto {
		switch {
		case hasAVX512:
			k = KernelsAVX512
		case hasAVX2:
			k = KernelsAVX2
		default:
			k = KernelsPortable
		}
	}
	switch k {
	case KernelsAVX512:
		return &avx512Set
	case KernelsAVX2:
		return &avx2Set
	case KernelsAMX:
		return &amxSet
	}
	return &portableSet
}

// kernelSet is one family's leaves. The sets are package-level values never
// written after initialization; a Backend points at one.
type kernelSet struct {
	family Kernels
	// fp4Perm: the FP4 kernels read activations, and write decoded weights,
	// de-interleaved per 32 columns (the group's 16 even columns, then its
	// 16 odd ones).
	fp4Perm bool
	// vector: the family's one-token products and prefill follow the
	// vector arithmetic (vec, gemmRowsVec); otherwise the portable one
	// (dot4.go, gemmRows).
	vector bool
	// amx: FP8, FP4 and BF16 matrices go through the AMX kernels (amxJob).
	amx bool

	vec vecAsm // the vector sets' routines
}

// The kernel leaves, called directly rather than through function values so
// that their arguments stay on the stack.

// decode writes row r of w, dequantized exactly and in kernel layout, to
// dst[:w.Cols]; fp8Scales are the row's block scales for FP8.
func (k *kernelSet) decode(ws *workspace, dst []float32, w *compute.Matrix, r int, fp8Scales []byte) {
	if k.vector {
		k.vec.decodeRow(dst, w, r, fp8Scales)
		return
	}
	decodePortable(ws, dst, w, r, fp8Scales)
}

// dot4 returns the products of the four rows r with the packed activations
// x (zero-padded to a multiple of 16 columns).
func (k *kernelSet) dot4(ws *workspace, r *row4, w *compute.Matrix, x []float32) [4]float32 {
	if k.vector {
		return k.vec.dot4(ws, r, w, x)
	}
	return dot4Portable(ws, r, w, x)
}

// groupRows returns the number of weight rows the prefill kernels decode
// together.
func (k *kernelSet) groupRows() int {
	if k.vector {
		return k.vec.gemmRows()
	}
	return groupRows
}

// portableSet is the plain Go family, whose arithmetic must never change
// (internal/regress pins it).
var portableSet = kernelSet{
	family:  KernelsPortable,
	fp4Perm: false,
}

func decodePortable(_ *workspace, dst []float32, w *compute.Matrix, r int, fp8Scales []byte) {
	K := w.Cols
	switch w.DType {
	case compute.F32:
		decodeF32Go(dst, w.Data[4*r*K:4*(r+1)*K])
	case compute.BF16:
		decodeBF16Go(dst, w.Data[2*r*K:2*(r+1)*K])
	case compute.F16:
		decodeF16Go(dst, w.Data[2*r*K:2*(r+1)*K])
	case compute.FP8:
		decodeFP8Go(dst, w.Data[r*K:(r+1)*K], fp8Scales, w.BlockCols)
	case compute.FP4:
		g := K / compute.FP4GroupSize
		decodeFP4Go(dst, w.Data[r*K/2:(r+1)*K/2], w.Scale[r*g:(r+1)*g])
	default:
		panic(fmt.Sprintf("cpu: MatMul: unsupported dtype %v", w.DType))
	}
}

func dot4Portable(_ *workspace, r *row4, w *compute.Matrix, x []float32) [4]float32 {
	K := w.Cols
	switch w.DType {
	case compute.F32:
		return dot4F32Go(r, K, x)
	case compute.BF16:
		return dot4BF16Go(r, K, x)
	case compute.F16:
		return dot4F16Go(r, K, x)
	case compute.FP8:
		return dot4FP8Go(r, K, w.BlockCols, x)
	case compute.FP4:
		return dot4FP4Go(r, K, x)
	}
	panic(fmt.Sprintf("cpu: MatMul: unsupported dtype %v", w.DType))
}
