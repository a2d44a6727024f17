//go:build !goexperiment.simd || !amd64

package cpu

// Without GOEXPERIMENT=simd on amd64 the portable kernels run.

func fp4Deinterleaved() bool { return false }

func dotF32(w []byte, x []float32) float32                         { return dotF32Go(w, x) }
func dotBF16(w []byte, x []float32) float32                        { return dotBF16Go(w, x) }
func dotF16(w []byte, x []float32) float32                         { return dotF16Go(w, x) }
func dotFP8(w, scales []byte, bc int, x []float32) float32         { return dotFP8Go(w, scales, bc, x) }
func dotFP8Finite(w, scales []byte, bc int, x []float32) float32   { return dotFP8Go(w, scales, bc, x) }
func dotFP4(w, scales []byte, x []float32) float32                 { return dotFP4Go(w, scales, x) }
func decodeF32(dst []float32, w []byte)                            { decodeF32Go(dst, w) }
func decodeBF16(dst []float32, w []byte)                           { decodeBF16Go(dst, w) }
func decodeF16(dst []float32, w []byte)                            { decodeF16Go(dst, w) }
func decodeFP8(dst []float32, w, scales []byte, bc int)            { decodeFP8Go(dst, w, scales, bc) }
func decodeFP4(dst []float32, w, scales []byte)                    { decodeFP4Go(dst, w, scales) }
func gemm4x2(w []float32, ws int, x0, x1 []float32, acc *[8]lanes) { gemm4x2Go(w, ws, x0, x1, acc) }
func gemm4x1(w []float32, ws int, x0 []float32, acc *[4]lanes)     { gemm4x1Go(w, ws, x0, acc) }
func sumFloat32(a []float32) float32                               { return sumFloat32Go(a) }
func sumLanes(l *lanes) float32                                    { return sumLanesGo(l) }
