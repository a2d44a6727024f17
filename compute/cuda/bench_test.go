package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"
	"unsafe"

	"github.com/strata-inference/strata/compute"
)

// Ceilings of the H200 the figures are set against (measured on that
// machine with PyTorch: a device copy and a bf16 matrix product).
const (
	hbmGBs     = 4300.0
	bf16TFLOPs = 790.0
)

// timeGPU returns the median over reps of the GPU milliseconds of iters
// calls of fn(i), measured with events on the thread's stream after one
// warm-up round.
func timeGPU(th *Thread, iters, reps int, fn func(i int) error) (float64, error) {
	s := th.Stream()
	e0, err := th.NewEvent(true)
	if err != nil {
		return 0, err
	}
	defer th.DestroyEvent(e0)
	e1, err := th.NewEvent(true)
	if err != nil {
		return 0, err
	}
	defer th.DestroyEvent(e1)
	for i := range iters {
		if err := fn(i); err != nil {
			return 0, err
		}
	}
	var ms []float64
	for range reps {
		th.Record(e0, s)
		for i := range iters {
			if err := fn(i); err != nil {
				return 0, err
			}
		}
		th.Record(e1, s)
		if err := th.EventSync(e1); err != nil {
			return 0, err
		}
		m, err := th.Elapsed(e0, e1)
		if err != nil {
			return 0, err
		}
		ms = append(ms, m/float64(iters))
	}
	sort.Float64s(ms)
	return ms[len(ms)/2], nil
}

// timeGraph is timeGPU for work too short to outrun the host's launches
// (about 4.6 us each on the H200 machine): the iters calls are captured
// once into a graph on the thread's stream, and the graph's replays are
// timed, so that the figure is the GPU's time alone.
func timeGraph(th *Thread, iters, reps int, fn func(i int) error) (float64, error) {
	s := th.Stream()
	if err := th.BeginCapture(s); err != nil {
		return 0, err
	}
	for i := range iters {
		if err := fn(i); err != nil {
			th.EndCapture(s)
			return 0, err
		}
	}
	g, err := th.EndCapture(s)
	if err != nil {
		return 0, err
	}
	defer th.DestroyGraph(g)
	ge, err := th.Instantiate(g)
	if err != nil {
		return 0, err
	}
	defer th.DestroyGraphExec(ge)
	ms, err := timeGPU(th, 1, reps, func(int) error { return th.LaunchGraph(ge, s) })
	return ms / float64(iters), err
}

// deviceMatrices uploads copies of a random matrix, enough to cover
// minBytes, so that a benchmark rotating through them reads HBM, not L2.
func deviceMatrices(th *Thread, m *compute.Matrix, minBytes int64) ([]*Matrix, error) {
	n := int(max(1, (minBytes+m.Bytes()-1)/m.Bytes()))
	var ws []*Matrix
	for range n {
		w, err := th.UploadMatrix(m, th.Stream())
		if err != nil {
			freeMatrices(th, ws)
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, th.Sync(th.Stream())
}

func freeMatrices(th *Thread, ws []*Matrix) {
	for _, w := range ws {
		th.FreeMatrix(w)
	}
}

// productOperands uploads copies of m over 512 MB (deviceMatrices), T
// rows of random activations and room for T rows of outputs, for a
// benchmark of T-token products; free releases them.
func productOperands(th *Thread, m *compute.Matrix, T int) (ws []*Matrix, x, y Ptr, free func(), err error) {
	if ws, err = deviceMatrices(th, m, 512<<20); err != nil {
		return nil, 0, 0, nil, err
	}
	if x, err = upload(th, randFloats(rand.New(rand.NewPCG(2, 3)), T*m.Cols)); err != nil {
		freeMatrices(th, ws)
		return nil, 0, 0, nil, err
	}
	if y, err = th.Alloc(int64(4 * m.Rows * T)); err != nil {
		th.Free(x)
		freeMatrices(th, ws)
		return nil, 0, 0, nil, err
	}
	return ws, x, y, func() { th.Free(y); th.Free(x); freeMatrices(th, ws) }, nil
}

func benchDo(b *testing.B, fn func(th *Thread) error) {
	b.Helper()
	if err := device(b).Do(context.Background(), fn); err != nil {
		b.Fatal(err)
	}
}

type benchMatrix struct {
	dt         compute.DType
	rows, cols int
}

func (c benchMatrix) String() string { return fmt.Sprintf("%v-%dx%d", c.dt, c.rows, c.cols) }

// make returns a matrix of random codes (finite: no FP8 NaN, bf16 and
// f32 values near 1), made fast since the output head holds half a
// billion weights.
func (c benchMatrix) make() *compute.Matrix {
	rng := rand.New(rand.NewPCG(1, uint64(c.rows)))
	m := &compute.Matrix{DType: c.dt, Rows: c.rows, Cols: c.cols, BlockRows: 128, BlockCols: 128}
	n := c.rows * c.cols
	fill := func(b []byte, mask, set uint64) {
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64()&mask|set)
		}
	}
	switch c.dt {
	case compute.F32:
		m.Data = make([]byte, 4*n)
		fill(m.Data, 0x807FFFFF807FFFFF, 0x3F0000003F000000)
	case compute.BF16, compute.F16:
		m.Data = make([]byte, 2*n)
		fill(m.Data, 0x83FF83FF83FF83FF, 0x3C003C003C003C00) // bf16 ~2^-7..2^-6, f16 ~1..2
	case compute.FP8:
		m.Data = make([]byte, n)
		fill(m.Data, 0xF7F7F7F7F7F7F7F7, 0) // exponent bit 3 clear: never 0x7F
		m.Scale = make([]byte, ((c.rows+127)/128)*((c.cols+127)/128))
		fill(m.Scale, 0x0303030303030303, 0x7878787878787878)
	case compute.FP4:
		m.Data = make([]byte, n/2)
		fill(m.Data, ^uint64(0), 0)
		m.Scale = make([]byte, n/32)
		fill(m.Scale, 0x0303030303030303, 0x7878787878787878)
	}
	if err := m.Validate(); err != nil {
		panic(err)
	}
	return m
}

// BenchmarkCopy measures the device-to-device copy bandwidth (bytes read
// plus written), the memory ceiling the GEMV figures compare with.
func BenchmarkCopy(b *testing.B) {
	const n = 2 << 30
	for b.Loop() {
		benchDo(b, func(th *Thread) error {
			src, err := th.Alloc(n)
			if err != nil {
				return err
			}
			defer th.Free(src)
			dst, err := th.Alloc(n)
			if err != nil {
				return err
			}
			defer th.Free(dst)
			th.Memset8(src, 1, n, th.Stream())
			ms, err := timeGPU(th, 5, 5, func(int) error { return th.Copy(dst, src, n, th.Stream()) })
			b.ReportMetric(2*n/ms/1e6, "GB/s")
			return err
		})
	}
}

// BenchmarkGEMV measures one-token products (T=1, the decode case) in
// each weight format on Flash-width matrices, as bandwidth against 4.3 TB/s.
func BenchmarkGEMV(b *testing.B) {
	for _, c := range []benchMatrix{
		{compute.FP8, 4096, 4096}, {compute.FP8, 1024, 4096}, {compute.FP4, 2048, 4096}, {compute.FP4, 4096, 2048},
		{compute.BF16, 4096, 4096}, {compute.F32, 1024, 4096},
		{compute.FP8, 32768, 1024},   // DeepSeek-V4-Flash wq_b: 64 heads of 512 from q_lora 1024
		{compute.BF16, 129280, 4096}, // the output head
	} {
		var m *compute.Matrix // made once, by the first run that has a device
		for _, version := range []int{1, 2} {
			for _, T := range []int{1, 4} {
				if T > 1 && version == 1 {
					continue
				}
				benchGEMV(b, c, &m, version, T)
			}
		}
	}
}

func benchGEMV(b *testing.B, c benchMatrix, mp **compute.Matrix, version, T int) {
	b.Run(fmt.Sprintf("%v/v%d/T=%d", c, version, T), func(b *testing.B) {
		device(b)
		if *mp == nil {
			*mp = c.make()
		}
		m := *mp
		for b.Loop() {
			benchDo(b, func(th *Thread) error {
				ws, x, y, free, err := productOperands(th, m, T)
				if err != nil {
					return err
				}
				defer free()
				k := device(b).Kernels()
				call := func(i int) error {
					return k.matMulGEMVVersion(th, th.Stream(), y, x, T, ws[i%len(ws)], version)
				}
				direct, err := timeGPU(th, 4*len(ws), 7, call)
				if err != nil {
					return err
				}
				ms, err := timeGraph(th, 4*len(ws), 7, call)
				gbs := float64(m.Bytes()) / ms / 1e6
				b.ReportMetric(ms*1e3, "us")
				b.ReportMetric(direct*1e3, "launched-us")
				b.ReportMetric(gbs, "GB/s")
				b.ReportMetric(gbs/hbmGBs, "of-HBM")
				return err
			})
		}
	})
}

// BenchmarkGEMM measures many-token products (prefill) on the tensor
// cores against the bf16 peak, and the strict kernel at T=512.
func BenchmarkGEMM(b *testing.B) {
	for _, c := range []benchMatrix{{compute.FP8, 4096, 4096}, {compute.FP4, 2048, 4096}, {compute.BF16, 4096, 4096}} {
		for _, T := range []int{512, 2048, 8192} {
			for _, mode := range []Mode{Fast, Strict} {
				if mode == Strict && T != 512 {
					continue
				}
				name := fmt.Sprintf("%v/T=%d", c, T)
				if mode == Strict {
					name += "/strict"
				}
				b.Run(name, func(b *testing.B) {
					device(b)
					m := c.make()
					for b.Loop() {
						benchDo(b, func(th *Thread) error {
							w, err := th.UploadMatrix(m, th.Stream())
							if err != nil {
								return err
							}
							defer th.FreeMatrix(w)
							x, err := upload(th, randFloats(rand.New(rand.NewPCG(2, 3)), T*c.cols))
							if err != nil {
								return err
							}
							defer th.Free(x)
							y, err := th.Alloc(int64(4 * c.rows * T))
							if err != nil {
								return err
							}
							defer th.Free(y)
							k := device(b).Kernels()
							ms, err := timeGPU(th, 3, 5, func(int) error { return k.MatMul(th, th.Stream(), y, x, T, w, mode) })
							tf := 2 * float64(c.rows) * float64(c.cols) * float64(T) / ms / 1e9
							b.ReportMetric(ms*1e3, "us")
							b.ReportMetric(tf, "TFLOP/s")
							b.ReportMetric(tf/bf16TFLOPs, "of-peak")
							return err
						})
					}
				})
			}
		}
	}
}

// BenchmarkCrossover times the float32 and the tensor-core products (run
// 8's gemm.cu, and gemmx with its split of x) at small T, to place
// FastGEMVMaxT.
func BenchmarkCrossover(b *testing.B) {
	device(b)
	for _, c := range []benchMatrix{{compute.FP8, 4096, 4096}, {compute.FP8, 1024, 4096}, {compute.FP4, 2048, 4096}, {compute.BF16, 4096, 4096}} {
		benchCrossover(b, c)
	}
}

func benchCrossover(b *testing.B, c benchMatrix) {
	m := c.make()
	for _, T := range []int{1, 2, 4, 8, 12, 16, 24, 32, 64, 128} {
		b.Run(fmt.Sprintf("%v/T=%d", c, T), func(b *testing.B) {
			for b.Loop() {
				benchDo(b, func(th *Thread) error {
					ws, err := deviceMatrices(th, m, 256<<20)
					if err != nil {
						return err
					}
					defer freeMatrices(th, ws)
					x, err := upload(th, randFloats(rand.New(rand.NewPCG(2, 3)), T*c.cols))
					if err != nil {
						return err
					}
					defer th.Free(x)
					y, err := th.Alloc(int64(4 * c.rows * T))
					if err != nil {
						return err
					}
					defer th.Free(y)
					k := device(b).Kernels()
					gemv, err := timeGPU(th, len(ws), 5, func(i int) error { return k.matMulGEMV(th, th.Stream(), y, x, T, ws[i]) })
					if err != nil {
						return err
					}
					gemm, err := timeGPU(th, len(ws), 5, func(i int) error { return k.matMulGEMM(th, th.Stream(), y, x, T, ws[i]) })
					if err != nil {
						return err
					}
					gemmx, free, err := gemmxBench(th, k, c, T, x, y)
					if err != nil {
						return err
					}
					defer free()
					gx, err := timeGPU(th, len(ws), 5, func(i int) error { return gemmx(ws[i]) })
					b.ReportMetric(gemv*1e3, "gemv-us")
					b.ReportMetric(gemm*1e3, "gemm-us")
					b.ReportMetric(gx*1e3, "gemmx-us")
					return err
				})
			}
		})
	}
}

// BenchmarkRows times the row kernels at decode/indexer sizes.
func BenchmarkRows(b *testing.B) {
	type op struct {
		name string
		n    int // floats of input
		run  func(th *Thread, k *Kernels, x, y, aux Ptr) error
		// zeros: the input's first live floats 0, the rest -Inf (else random).
		zeros bool
		live  int
	}
	ops := []op{
		{"rmsnorm-64x4096", 64 * 4096, func(th *Thread, k *Kernels, x, y, _ Ptr) error {
			return k.RMSNorm(th, th.Stream(), y, x, 0, 64, 4096, 1e-6)
		}, false, 0},
		{"softmax-8x129280", 8 * 129280, func(th *Thread, k *Kernels, x, _, _ Ptr) error {
			return k.Softmax(th, th.Stream(), x, 8, 129280)
		}, false, 0},
		{"topk512-64x16384", 64 * 16384, func(th *Thread, k *Kernels, x, y, _ Ptr) error {
			return k.TopK(th, th.Stream(), y, x, 64, 16384, 512)
		}, false, 0},
		{"topk512-1x65536", 65536, func(th *Thread, k *Kernels, x, y, _ Ptr) error {
			return k.TopK(th, th.Stream(), y, x, 1, 65536, 512)
		}, false, 0},
	}
	// The indexer's top-k at batch 1 (4K and 64K contexts: 1K and 16K
	// closed entries), scores random and all equal (zeros, the rest of
	// the row -Inf: BenchmarkFlash's cache).
	// topk-r26: run 26's topk (the row read in each pass) beside topk_reg4
	// (1280) or topk_reg (16640).
	for _, n := range []int{1024, 16384} {
		for _, zeros := range []bool{false, true} {
			for _, reg := range []bool{true, false} {
				name := fmt.Sprintf("topk512-1x%d-%s", n+256, map[bool]string{false: "random", true: "zeros"}[zeros])
				if !reg {
					name += "-r26"
				}
				ops = append(ops, op{name, n + 256, func(th *Thread, k *Kernels, x, y, _ Ptr) error {
					return k.topK(th, th.Stream(), y, x, 1, n+256, 512, reg)
				}, zeros, n})
			}
		}
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			for b.Loop() {
				benchDo(b, func(th *Thread) error {
					in := randFloats(rand.New(rand.NewPCG(4, 5)), o.n)
					if o.zeros {
						for i := range in {
							in[i] = 0
							if i >= o.live {
								in[i] = float32(math.Inf(-1))
							}
						}
					}
					x, err := upload(th, in)
					if err != nil {
						return err
					}
					defer th.Free(x)
					y, err := th.Alloc(int64(4 * o.n))
					if err != nil {
						return err
					}
					defer th.Free(y)
					k := device(b).Kernels()
					ms, err := timeGraph(th, 20, 5, func(int) error { return o.run(th, k, x, y, 0) })
					b.ReportMetric(ms*1e3, "us")
					return err
				})
			}
		})
	}
}

// BenchmarkLaunch measures the executor's overheads: a Do round trip
// (the hop to the device goroutine), the host cost of one cuLaunchKernel
// through purego, and the GPU time per kernel launched directly and from a
// captured graph.
func BenchmarkLaunch(b *testing.B) {
	b.Run("do-hop", func(b *testing.B) {
		// Warm round trips, as a decode loop makes them (-benchtime 1x
		// would otherwise time one cold call, which wakes a parked thread).
		d := device(b)
		ctx := context.Background()
		const n = 20000
		for b.Loop() {
			start := time.Now()
			for range n {
				if err := d.Do(ctx, func(*Thread) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "ns/hop")
		}
	})
	b.Run("driver-call", func(b *testing.B) {
		// The cheapest driver call: what purego and the driver's entry cost.
		for b.Loop() {
			benchDo(b, func(th *Thread) error {
				const n = 100000
				var v int32
				start := time.Now()
				for range n {
					ccall(th.drv.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
				}
				b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "host-ns/call")
				return nil
			})
		}
	})
	b.Run("launch", func(b *testing.B) {
		const n = 20000
		for b.Loop() {
			benchDo(b, func(th *Thread) error {
				k := device(b).Kernels()
				s := th.Stream()
				launch := func(int) error { return th.Launch(k.empty, Dim3{X: 1}, Dim3{X: 32}, 0, s, th.Args().Int(0)) }
				for i := range 1000 {
					launch(i)
				}
				th.Sync(s)
				start := time.Now()
				for i := range n {
					if err := launch(i); err != nil {
						return err
					}
				}
				host := time.Since(start)
				if err := th.Sync(s); err != nil {
					return err
				}
				gpu, err := timeGPU(th, 1000, 5, launch)
				b.ReportMetric(float64(host.Nanoseconds())/n, "host-ns/launch")
				b.ReportMetric(gpu*1e6, "gpu-ns/kernel")
				return err
			})
		}
	})
	b.Run("graph", func(b *testing.B) {
		const n = 200
		for b.Loop() {
			benchDo(b, func(th *Thread) error {
				k := device(b).Kernels()
				s, err := th.NewStream()
				if err != nil {
					return err
				}
				defer th.DestroyStream(s)
				if err := th.BeginCapture(s); err != nil {
					return err
				}
				for range n {
					if err := th.Launch(k.empty, Dim3{X: 1}, Dim3{X: 32}, 0, s, th.Args().Int(0)); err != nil {
						th.EndCapture(s)
						return err
					}
				}
				g, err := th.EndCapture(s)
				if err != nil {
					return err
				}
				defer th.DestroyGraph(g)
				ge, err := th.Instantiate(g)
				if err != nil {
					return err
				}
				defer th.DestroyGraphExec(ge)
				ts := th.Stream()
				start := time.Now()
				const reps = 200
				for range reps {
					if err := th.LaunchGraph(ge, ts); err != nil {
						return err
					}
				}
				host := time.Since(start)
				th.Sync(ts)
				ms, err := timeGPU(th, 20, 5, func(int) error { return th.LaunchGraph(ge, ts) })
				b.ReportMetric(float64(host.Nanoseconds())/reps, "host-ns/graph")
				b.ReportMetric(ms*1e6/n, "gpu-ns/kernel")
				return err
			})
		}
	})
}

// BenchmarkGEMMX times gemmx (split_bf16x, then gemmx cut as the Backend cuts it) against run
// 8's fast product (split_bf16, gemm.cu on hi and on lo, add: timed as
// gemm.cu twice, the two small launches left out) on Flash shapes, the
// weights rotated over 256 MB so that L2 does not serve them. TFLOP/s
// count one product (2·M·K·T), as the model needs it.
func BenchmarkGEMMX(b *testing.B) {
	cases := []benchMatrix{{compute.FP8, 4096, 4096}, {compute.FP8, 32768, 1024}, {compute.FP8, 1024, 4096}, {compute.FP4, 2048, 4096}, {compute.BF16, 4096, 4096}}
	for _, c := range cases {
		m := c.make()
		for _, T := range []int{33, 64, 128, 256, 512, 2048, 8192} {
			b.Run(fmt.Sprintf("%v/T=%d", c, T), func(b *testing.B) {
				device(b)
				for b.Loop() {
					benchDo(b, func(th *Thread) error {
						ws, err := deviceMatrices(th, m, 256<<20)
						if err != nil {
							return err
						}
						defer freeMatrices(th, ws)
						x, err := upload(th, randFloats(rand.New(rand.NewPCG(2, 3)), T*c.cols))
						if err != nil {
							return err
						}
						defer th.Free(x)
						y, err := th.Alloc(int64(4 * c.rows * T))
						if err != nil {
							return err
						}
						defer th.Free(y)
						k := device(b).Kernels()
						gemmx, free, err := gemmxBench(th, k, c, T, x, y)
						if err != nil {
							return err
						}
						defer free()
						iters := min(len(ws), 16)
						gx, err := timeGPU(th, iters, 5, func(i int) error { return gemmx(ws[i]) })
						if err != nil {
							return err
						}
						k.useO1 = true
						o1, err := timeGPU(th, iters, 5, func(i int) error { return gemmx(ws[i]) })
						k.useO1 = false
						if err != nil {
							return err
						}
						b.ReportMetric(o1*1e3, "o1-us")
						g8, err := timeGPU(th, iters, 5, func(i int) error { return k.matMulGEMM(th, th.Stream(), y, x, T, ws[i]) })
						flop := 2 * float64(c.rows) * float64(c.cols) * float64(T)
						b.ReportMetric(gx*1e3, "gemmx-us")
						b.ReportMetric(2*g8*1e3, "r8-us")
						b.ReportMetric(flop/gx/1e9, "gemmx-TFLOP/s")
						b.ReportMetric(float64(m.Bytes())/gx/1e6, "gemmx-GB/s")
						return err
					})
				}
			})
		}
	}
}

// gemmxBench prepares gemmx's products of T tokens of x (device floats)
// into y by matrices of c's shape, as the Backend runs them: run(w) queues
// split_bf16x and gemmx, the parts apart where the Backend puts them
// apart; free releases the buffers.
func gemmxBench(th *Thread, k *Kernels, c benchMatrix, T int, x, y Ptr) (run func(w *Matrix) error, free func(), err error) {
	xh, xl, err := allocSplit(th, T*c.cols)
	if err != nil {
		return nil, nil, err
	}
	var part Ptr
	if S := gemmxPartsApart(blocks(c.rows, gemmxRows), c.cols, T); S > 0 {
		if part, err = th.Alloc(int64(4 * S * T * c.rows)); err != nil {
			th.Free(xh)
			th.Free(xl)
			return nil, nil, err
		}
	}
	run = func(w *Matrix) error {
		if err := k.splitX(th, th.Stream(), xh, xl, x, T*c.cols); err != nil {
			return err
		}
		return k.matMulX(th, th.Stream(), y, c.rows, 0, xh, xl, c.cols, 0, T, w, 1, 0, part)
	}
	free = func() {
		th.Free(xh)
		th.Free(xl)
		if part != 0 {
			th.Free(part)
		}
	}
	return run, free, nil
}

// BenchmarkPrefetch measures what l2_prefetch buys a T=1 product: each
// product of a matrix (rotated over 512 MB, so that HBM serves it cold) is
// timed alone between two events, cold, after an l2_prefetch of its
// matrix, and right after the same product (what the L2 keeps of it),
// each after ~20 launches of the empty kernel that give the prefetch time
// to land; medians over the matrices. prefetch-us is the l2_prefetch
// launch itself.
func BenchmarkPrefetch(b *testing.B) {
	for _, c := range []benchMatrix{
		{compute.FP8, 4096, 8192},  // wo_b
		{compute.FP8, 32768, 1024}, // wq_b
		{compute.FP8, 4096, 4096},
		{compute.BF16, 4096, 4096},
	} {
		b.Run(c.String(), func(b *testing.B) {
			device(b)
			m := c.make()
			for b.Loop() {
				benchDo(b, func(th *Thread) error {
					ws, x, y, free, err := productOperands(th, m, 1)
					if err != nil {
						return err
					}
					defer free()
					k := device(b).Kernels()
					s := th.Stream()
					var ev [2]Event
					for i := range ev {
						if ev[i], err = th.NewEvent(true); err != nil {
							return err
						}
						defer th.DestroyEvent(ev[i])
					}
					gemv := func(w *Matrix) error { return k.matMulGEMVVersion(th, s, y, x, 1, w, 2) }
					prefetch := func(w *Matrix) error {
						data := w.rowBytes() * int64(w.Rows)
						var words [pfRegions + pfRegions/2]uint64
						words[0], words[pfRegions] = uint64(w.Data), uint64(uint32(data/16))
						nr := 1
						if w.Scale != 0 && w.bytes > data {
							words[1] = uint64(w.Scale)
							words[pfRegions] |= uint64(uint32((w.bytes-data)/16)) << 32
							nr = 2
						}
						threads := (data + pfPiece - 1) / pfPiece
						return th.Launch(k.fns["l2_prefetch"], Dim3{X: int((threads + 127) / 128)}, Dim3{X: 128}, 0, s, th.Args().Struct(words[:]...).Int(nr))
					}
					delay := func() error {
						for range 20 {
							if err := th.Launch(k.empty, Dim3{X: 1}, Dim3{X: 32}, 0, s, th.Args().Int(0)); err != nil {
								return err
							}
						}
						return nil
					}
					timed := func(fn func() error) (float64, error) {
						th.Record(ev[0], s)
						if err := fn(); err != nil {
							return 0, err
						}
						th.Record(ev[1], s)
						if err := th.EventSync(ev[1]); err != nil {
							return 0, err
						}
						return th.Elapsed(ev[0], ev[1])
					}
					var cold, hot, again, pf []float64
					for i, w := range ws {
						if i == 0 {
							continue // warm-up
						}
						if err := delay(); err != nil {
							return err
						}
						ms, err := timed(func() error { return gemv(w) })
						if err != nil {
							return err
						}
						cold = append(cold, ms)
						if err := delay(); err != nil {
							return err
						}
						if ms, err = timed(func() error { return gemv(w) }); err != nil {
							return err
						}
						again = append(again, ms)
						v := ws[(i+len(ws)/2)%len(ws)] // not read since the last rotation
						if ms, err = timed(func() error { return prefetch(v) }); err != nil {
							return err
						}
						pf = append(pf, ms)
						if err := delay(); err != nil {
							return err
						}
						if ms, err = timed(func() error { return gemv(v) }); err != nil {
							return err
						}
						hot = append(hot, ms)
					}
					med := func(v []float64) float64 { sort.Float64s(v); return v[len(v)/2] }
					b.ReportMetric(med(cold)*1e3, "cold-us")
					b.ReportMetric(med(hot)*1e3, "prefetched-us")
					b.ReportMetric(med(again)*1e3, "again-us")
					b.ReportMetric(med(pf)*1e3, "prefetch-us")
					return nil
				})
			}
		})
	}
}

// BenchmarkGEMVX times gemvx (Fast, the tensor cores) against the float32
// GEMV on FP8 and BF16 Flash shapes (the last the output head) at 1 to 8 tokens: graph replays rotating over
// 512 MB of copies, as BenchmarkGEMV.
func BenchmarkGEMVX(b *testing.B) {
	for _, c := range []benchMatrix{
		{compute.FP8, 4096, 8192}, {compute.FP8, 32768, 1024}, {compute.FP8, 4096, 4096}, {compute.FP8, 4096, 2048},
		{compute.BF16, 4096, 4096}, {compute.BF16, 129280, 4096},
	} {
		var m *compute.Matrix
		for _, T := range []int{1, 2, 3, 4, 8} {
			b.Run(fmt.Sprintf("%v/T=%d", c, T), func(b *testing.B) {
				device(b)
				if m == nil {
					m = c.make()
				}
				for b.Loop() {
					benchDo(b, func(th *Thread) error {
						ws, x, y, free, err := productOperands(th, m, T)
						if err != nil {
							return err
						}
						defer free()
						k := device(b).Kernels()
						v0, cols0 := k.gemvpV, k.gemvxpCols
						defer func() { k.gemvpV, k.gemvxpCols = v0, cols0 }()
						k.gemvpV, k.gemvxpCols = 0, 0 // gemv2 and gemvx's own entries
						gemv, err := timeGraph(th, 2*len(ws), 5, func(i int) error {
							return k.MatMul(th, th.Stream(), y, x, T, ws[i%len(ws)], Strict)
						})
						if err != nil {
							return err
						}
						vx, err := timeGraph(th, 2*len(ws), 5, func(i int) error {
							return k.gemvx(th, th.Stream(), y, c.rows, 0, x, c.cols, 0, T, ws[i%len(ws)], 1, 0)
						})
						if err != nil {
							return err
						}
						k.gemvxM1 = 2 // tiles of 32 rows a block whatever the shape
						vx32, err := timeGraph(th, 2*len(ws), 5, func(i int) error {
							return k.gemvx(th, th.Stream(), y, c.rows, 0, x, c.cols, 0, T, ws[i%len(ws)], 1, 0)
						})
						k.gemvxM1 = 0
						if _, _, ok := fp8Shifts(ws[0]); ok {
							// gemvxp (the loads in a ring) and, at one token,
							// gemvp (gemv2's bits, the same).
							vxp, err := timeGraph(th, 2*len(ws), 5, func(i int) error {
								return k.gemvxpAt(th, th.Stream(), y, c.rows, 0, x, c.cols, 0, T, ws[i%len(ws)], 1, 0, 0)
							})
							if err != nil {
								return err
							}
							b.ReportMetric(vxp*1e3, "gemvxp-us")
							if T == 1 {
								k.gemvpV = gemvpVDefault
								p, err := timeGraph(th, 2*len(ws), 5, func(i int) error {
									return k.MatMul(th, th.Stream(), y, x, T, ws[i%len(ws)], Strict)
								})
								k.gemvpV = 0
								if err != nil {
									return err
								}
								b.ReportMetric(p*1e3, "gemvp-us")
							}
						}
						b.ReportMetric(gemv*1e3, "gemv-us")
						b.ReportMetric(vx*1e3, "gemvx-us")
						b.ReportMetric(vx32*1e3, "gemvx32-us")
						b.ReportMetric(float64(m.Bytes())/vx/1e6/hbmGBs, "gemvx-of-HBM")
						return err
					})
				}
			})
		}
	}
}
