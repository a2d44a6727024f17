package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// coldBytes is how much weight memory the decode benchmarks cycle through,
// so that every MatMul streams its weights from memory rather than from a
// cache, as decoding a large model does.
const coldBytes = 256 << 20

// BenchmarkMatMul reports, for every kernel family the CPU runs and for
// decode (T=1) and prefill (T=128) shapes, the weight bytes streamed per
// second (GB/s; also MB/s from SetBytes) and, for prefill, GFLOP/s
// (2·rows·cols·T per call).
func BenchmarkMatMul(b *testing.B) {
	type shape struct {
		dt         compute.DType
		rows, cols int
	}
	shapes := []shape{
		{compute.F32, 2048, 2048},
		{compute.BF16, 2048, 2048},
		{compute.F16, 2048, 2048},
		{compute.FP8, 2048, 2048},
		{compute.FP8, 4096, 4096},
		{compute.FP4, 1024, 2048},
		{compute.FP4, 2048, 1024},
		// DeepSeek-V4-Flash's decode shapes: a slice of the bf16 head,
		// wq_b, the experts' W1/W3 and W2.
		{compute.BF16, 8192, 4096},
		{compute.FP8, 8192, 1024},
		{compute.FP4, 2048, 4096},
		{compute.FP4, 4096, 2048},
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sh := range shapes {
		m := benchMatrix(rng, sh.dt, sh.rows, sh.cols)
		m.NaNFree = sh.dt == compute.FP8 // as the binder promises for checkpoints
		for _, T := range []int{1, 128} {
			ks := families()
			if KernelsAMX.Available() && amxTakes(sh.dt) {
				ks = append(ks, KernelsAMX)
			}
			for _, k := range ks {
				be := newWith(b, 0, k)
				b.Run(fmt.Sprintf("%v/%dx%d/T=%d/%v", sh.dt, sh.rows, sh.cols, T, k), func(b *testing.B) {
					ms := []*compute.Matrix{m}
					if T == 1 {
						ms = coldCopies(m)
					}
					x := randVec(rng, T*sh.cols)
					y := make([]float32, T*sh.rows)
					be.MatMulF32(y, x, T, m)
					b.SetBytes(m.Bytes())
					for i := 0; b.Loop(); i++ {
						be.MatMulF32(y, x, T, ms[i%len(ms)])
					}
					sec := b.Elapsed().Seconds()
					b.ReportMetric(float64(b.N)*float64(m.Bytes())/sec/1e9, "GB/s")
					if T > 1 {
						b.ReportMetric(float64(b.N)*2*float64(sh.rows*sh.cols*T)/sec/1e9, "GFLOP/s")
					}
				})
			}
		}
	}
}

// BenchmarkMatMulHot is the decode case (T=1) on matrices that stay in the
// L2 caches (1 MiB of weights or less), so that it measures the kernels'
// speed rather than the memory's: the headroom of each kernel over the
// machine's bandwidth.
func BenchmarkMatMulHot(b *testing.B) {
	type shape struct {
		dt         compute.DType
		rows, cols int
	}
	shapes := []shape{
		{compute.F32, 256, 1024},
		{compute.BF16, 512, 1024},
		{compute.F16, 512, 1024},
		{compute.FP8, 1024, 1024},
		{compute.FP4, 1024, 2048},
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for _, sh := range shapes {
		m := benchMatrix(rng, sh.dt, sh.rows, sh.cols)
		for _, nanFree := range []bool{false, true} {
			if nanFree && sh.dt != compute.FP8 {
				continue
			}
			m := *m
			m.NaNFree = nanFree
			name := fmt.Sprintf("%v/%dx%d", sh.dt, sh.rows, sh.cols)
			if nanFree {
				name += "/nanfree"
			}
			for _, k := range families() {
				be := newWith(b, 0, k)
				b.Run(name+"/"+k.String(), func(b *testing.B) {
					x := randVec(rng, sh.cols)
					y := make([]float32, sh.rows)
					be.MatMulF32(y, x, 1, &m)
					b.SetBytes(m.Bytes())
					for b.Loop() {
						be.MatMulF32(y, x, 1, &m)
					}
					b.ReportMetric(float64(b.N)*float64(m.Bytes())/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

// benchMatrix returns a rows x cols matrix of dtype dt holding Gaussian
// weights, quantized as checkpoints are (FP8 with 128x128 blocks).
func benchMatrix(rng *rand.Rand, dt compute.DType, rows, cols int) *compute.Matrix {
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
	}
	m := &compute.Matrix{DType: dt, Rows: rows, Cols: cols}
	switch dt {
	case compute.F32:
		m.Data = make([]byte, 4*len(w))
		for i, v := range w {
			binary.LittleEndian.PutUint32(m.Data[4*i:], math.Float32bits(v))
		}
	case compute.BF16, compute.F16:
		m.Data = make([]byte, 2*len(w))
		for i, v := range w {
			h := quant.Float32ToBF16(v)
			if dt == compute.F16 {
				h = quant.Float32ToF16(v)
			}
			binary.LittleEndian.PutUint16(m.Data[2*i:], h)
		}
	case compute.FP8:
		m.BlockRows, m.BlockCols = quant.FP8Block, quant.FP8Block
		m.Data, m.Scale = quant.QuantizeFP8Block(w, rows, cols)
	case compute.FP4:
		m.Data, m.Scale = quant.QuantizeFP4(w, rows, cols)
	}
	return m
}

// coldCopies returns copies of m totalling about coldBytes.
func coldCopies(m *compute.Matrix) []*compute.Matrix {
	n := max(1, int(coldBytes/m.Bytes()))
	ms := make([]*compute.Matrix, n)
	for i := range ms {
		c := *m
		c.Data = append([]byte(nil), m.Data...)
		c.Scale = append([]byte(nil), m.Scale...)
		ms[i] = &c
	}
	return ms
}

// BenchmarkMemBandwidth sums a 256 MiB []float32 split across GOMAXPROCS
// goroutines, with the same vector width as the kernels, and reports GB/s:
// the read bandwidth the decode MatMuls can approach.
func BenchmarkMemBandwidth(b *testing.B) {
	a := make([]float32, 64<<20)
	for i := range a {
		a[i] = 1
	}
	threads := runtime.GOMAXPROCS(0)
	sums := make([]float32, threads)
	b.SetBytes(int64(4 * len(a)))
	for b.Loop() {
		var wg sync.WaitGroup
		n := len(a) / threads
		for t := range threads {
			wg.Go(func() { sums[t] = sumFloat32Go(a[t*n : (t+1)*n]) })
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N)*float64(4*len(a))/b.Elapsed().Seconds()/1e9, "GB/s")
}

// BenchmarkTopK selects the 2048 largest of 300k values (a vocabulary-sized
// row), reporting values scanned per second.
func BenchmarkTopK(b *testing.B) {
	x := randVec(rand.New(rand.NewPCG(2, 2)), 300000)
	idx := make([]int32, 2048)
	be := New(1)
	for b.Loop() {
		be.TopK(idx, x, len(idx))
	}
	b.ReportMetric(float64(b.N)*float64(len(x))/b.Elapsed().Seconds()/1e9, "Gvalues/s")
}
