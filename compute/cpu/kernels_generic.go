//go:build !goexperiment.simd || !amd64

package cpu

// Without GOEXPERIMENT=simd on amd64 the portable kernels run.

func fp4Deinterleaved() bool { return false }

func decodeF32(dst []float32, w []byte)                            { decodeF32Go(dst, w) }
func decodeBF16(dst []float32, w []byte)                           { decodeBF16Go(dst, w) }
func decodeF16(dst []float32, w []byte)                            { decodeF16Go(dst, w) }
func decodeFP8(dst []float32, w, scales []byte, bc int)            { decodeFP8Go(dst, w, scales, bc) }
func decodeFP4(dst []float32, w, scales []byte)                    { decodeFP4Go(dst, w, scales) }
func gemm4x2(w []float32, ws int, x0, x1 []float32, acc *[8]lanes) { gemm4x2Go(w, ws, x0, x1, acc) }
func gemm4x1(w []float32, ws int, x0 []float32, acc *[4]lanes)     { gemm4x1Go(w, ws, x0, acc) }
func sumFloat32(a []float32) float32                               { return sumFloat32Go(a) }
func sumLanes(l *lanes) float32                                    { return sumLanesGo(l) }

func dot4F32(r *row4, K int, x []float32) [4]float32  { return dot4F32Go(r, K, x) }
func dot4BF16(r *row4, K int, x []float32) [4]float32 { return dot4BF16Go(r, K, x) }
func dot4F16(r *row4, K int, x []float32) [4]float32  { return dot4F16Go(r, K, x) }
func dot4FP8(r *row4, K, bc int, x []float32, _ bool, _ []float32) [4]float32 {
	return dot4FP8Go(r, K, bc, x)
}
func dot4FP4(r *row4, K int, x []float32) [4]float32 { return dot4FP4Go(r, K, x) }
