package qwen35

import "math"

// Scalar functions in float32, each computed in float64 and rounded once,
// which is what PyTorch's float32 kernels return up to the last bit.

func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

func silu(x float32) float32 { return float32(float64(x) / (1 + math.Exp(-float64(x)))) }

// softplus is log(1+e^x) with PyTorch's threshold: x itself above 20.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

// dot is the float32 inner product of a and b[:len(a)], in four partial
// sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy computes y += a·x over len(y).
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// scale computes y *= a.
func scale(y []float32, a float32) {
	for i := range y {
		y[i] *= a
	}
}
