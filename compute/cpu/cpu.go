// Package cpu implements compute.Backend on the CPU, in Go and Go assembly.
//
// Matrix products dequantize weights inside the kernels and accumulate in
// float32; every dequantized weight is exact (a stored value times a power of
// two), so results differ from a float64 reference only by float32 rounding
// of the sums. With one token (decoding), each weight row is streamed once
// and dotted with the activations as it is decoded. With several tokens, a
// group of four rows is decoded once into a small per-worker float32 buffer
// and multiplied with every token, two at a time, over chunks of columns that
// stay in the L1 cache; very long prefills go through tiles of tokens sized
// for the last-level cache. Rows are split across the calling goroutine and a
// few persistent helper goroutines (see pool.go).
//
// The matmul kernels come in families (Kernels): on amd64, Go assembly for
// AVX-512 and for AVX2+FMA, chosen at run time from the CPU's features;
// portable Go everywhere, the reference. Backend.SetKernels forces one. The
// families compute the same sums up to float32 rounding order (AVX-512 and
// AVX2 the same bits), each batch-invariant on its own; an opt-in AMX family
// trades exactness (bf16 activations) for prefill speed.
package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"

	"github.com/strata-inference/strata/compute"
)

var _ compute.Backend = (*Backend)(nil)

// Backend is a compute.Backend on the CPU. Its methods use up to Threads()
// goroutines per call and must not be called concurrently.
type Backend struct {
	s *state
}

// state is everything the Backend and its helper goroutines share. The
// helpers reference only the state, never the Backend, so an unreachable
// Backend can be cleaned up and its helpers stopped.
type state struct {
	threads int
	k       *kernelSet // the matmul kernels
	pool    pool
	_       [64]byte     // keeps next off the cache line the idle helpers poll
	next    atomic.Int64 // next work item of the job in progress
	_       [56]byte
	ws      []workspace // per-worker scratch, ws[i] used only by worker i
	xbuf    []float32   // the activations of the matmul in progress, padded and in kernel layout
	scratch scratch     // the step's temporaries (Scratch)
	gen     int64       // the last call id (nextGen)

	// Host-side buffers of the ops, reused call to call.
	spanBuf   []span    // the span table (spanList)
	tokSpan   []int32   // each token's span (SparseAttention)
	idxToks   []idxTok  // the tokens IndexerSelect scores
	idxScores []float32 // their scores
	moe       moeBufs
	ropePos   [1]int32 // Compress's RoPE position
	ringBuf   []float32
	slotBuf   []byte

	// Preallocated jobs, so that calls do not allocate.
	mm   matmulJob
	rows rowJob
	amx  amxJob
	att  attnJob
	idx  idxJob
	rng  rangeJob

	attn attnBufs // attendGroup's gathered keys and values (SharedKVAttention)

	amxPanels []uint16 // the activations of the AMX matmul in progress
}

// job is one call's work, split into items that workers claim in order.
type job interface {
	// run claims items from s.next until none are left, using ws[worker].
	run(s *state, worker int)
}

// New returns a CPU backend using up to threads goroutines per call;
// threads <= 0 means runtime.GOMAXPROCS(0).
func New(threads int) *Backend {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	s := &state{threads: threads, k: kernelsFor(KernelsAuto), ws: make([]workspace, threads)}
	b := &Backend{s: s}
	runtime.AddCleanup(b, (*state).stop, s)
	return b
}

// Threads returns the number of goroutines the backend uses per call.
func (b *Backend) Threads() int { return b.s.threads }

// claim returns the next item of the job in progress, and false when the
// n items are all claimed.
func (s *state) claim(n int) (int, bool) {
	i := int(s.next.Add(1) - 1)
	return i, i < n
}

// RMSNorm computes y[t] = w ⊙ (x[t] · (1/sqrt(mean(x[t]²) + eps))) for T rows
// of width n, in float32 as the reference does; a nil w means no weight. y may
// alias x.
func (b *Backend) RMSNormF32(y, x, w []float32, T, n int, eps float32) {
	checkLen("RMSNorm x", x, T*n)
	checkLen("RMSNorm y", y, T*n)
	if w != nil {
		checkLen("RMSNorm w", w, n)
	}
	b.s.rowsOp(rowJob{op: opRMSNorm, y: y, x: x, w: w, T: T, n: n, eps: eps})
}

// RoPE rotates, in each of the T rows of width n of x, the interleaved pairs
// (2i, 2i+1) of the last 2*len(invFreq) channels by the angle
// float32(float32(pos[t]) * invFreq[i]), whose cosine and sine are computed in
// float64 and rounded to float32:
//
//	x[2i]   = x[2i]*cos - x[2i+1]*sin
//	x[2i+1] = x[2i+1]*cos + x[2i]*sin
//
// (channel indices relative to the rotated part). inverse rotates by the
// negative angle, undoing the rotation up to rounding.
func (b *Backend) RoPEF32(x []float32, T, n int, pos []int32, invFreq []float32, inverse bool) {
	checkLen("RoPE x", x, T*n)
	if len(pos) < T {
		panic(fmt.Sprintf("cpu: RoPE has %d positions for %d rows", len(pos), T))
	}
	if 2*len(invFreq) > n {
		panic(fmt.Sprintf("cpu: RoPE rotates %d channels of rows of width %d", 2*len(invFreq), n))
	}
	b.s.rowsOp(rowJob{op: opRoPE, x: x, T: T, n: n, pos: pos, heads: 1, invFreq: invFreq, inverse: inverse})
}

// Softmax replaces each of the T rows of width n of x by its softmax:
// exp(x - max) / sum(exp(x - max)), the exponentials computed in float64 and
// summed in float64. A row whose maximum is +Inf or NaN becomes NaN.
func (b *Backend) SoftmaxF32(x []float32, T, n int) {
	checkLen("Softmax x", x, T*n)
	b.s.rowsOp(rowJob{op: opSoftmax, x: x, T: T, n: n})
}

func checkLen(what string, s []float32, n int) {
	if len(s) < n {
		panic(fmt.Sprintf("cpu: %s has length %d, want %d", what, len(s), n))
	}
}

type rowOp int

const (
	opRMSNorm rowOp = iota
	opRoPE
	opSoftmax
)

// rowJob applies a row-wise operation to T rows, in chunks of rows.
type rowJob struct {
	op      rowOp
	y, x, w []float32
	T, n    int
	eps     float32
	pos     []int32
	heads   int // rows per position (RoPE)
	invFreq []float32
	inverse bool
	chunk   int // rows per item
}

// rowsOp runs j, in parallel when the rows are many and wide enough to be
// worth waking workers (a wake-up costs a few microseconds).
func (s *state) rowsOp(j rowJob) {
	const minWork = 1 << 15 // values per worker
	if j.T == 0 || j.n == 0 {
		return
	}
	workers := min(j.T, j.T*j.n/minWork)
	j.chunk = max(1, j.T/(4*max(workers, 1)))
	s.rows = j
	s.parallel(&s.rows, workers)
	s.rows = rowJob{}
}

func (j *rowJob) run(s *state, worker int) {
	ws := &s.ws[worker]
	ws.ropeValid = false
	items := (j.T + j.chunk - 1) / j.chunk
	for {
		it, ok := s.claim(items)
		if !ok {
			return
		}
		for t := it * j.chunk; t < min((it+1)*j.chunk, j.T); t++ {
			switch j.op {
			case opRMSNorm:
				rmsNorm(j.y[t*j.n:(t+1)*j.n], j.x[t*j.n:(t+1)*j.n], j.w, j.eps)
			case opSoftmax:
				softmax(j.x[t*j.n : (t+1)*j.n])
			case opRoPE:
				ws.rope(j.x[t*j.n:(t+1)*j.n], j.pos[t/j.heads], j.invFreq, j.inverse)
			}
		}
	}
}

func rmsNorm(y, x, w []float32, eps float32) {
	ss := sumSquares(x)
	mean := ss / float32(len(x))
	r := float32(1 / math.Sqrt(float64(mean+eps)))
	if w == nil {
		for i, v := range x {
			y[i] = v * r
		}
		return
	}
	w = w[:len(x)]
	y = y[:len(x)]
	for i, v := range x {
		y[i] = w[i] * float32(v*r)
	}
}

// sumSquares returns the float32 sum of x[i]², with independent partial sums.
func sumSquares(x []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		s0 += v[0] * v[0]
		s1 += v[1] * v[1]
		s2 += v[2] * v[2]
		s3 += v[3] * v[3]
		s4 += v[4] * v[4]
		s5 += v[5] * v[5]
		s6 += v[6] * v[6]
		s7 += v[7] * v[7]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * x[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// rope rotates the last 2*len(invFreq) channels of row x for position pos. It
// keeps the cosines and sines of the last position in ws, since consecutive
// rows (heads of one token) often share a position; the job resets the cache
// at the start of every call, as invFreq may change between calls.
func (ws *workspace) rope(x []float32, pos int32, invFreq []float32, inverse bool) {
	nf := len(invFreq)
	if !ws.ropeValid || ws.ropePos != pos {
		if cap(ws.ropeCos) < nf {
			ws.ropeCos = make([]float32, nf)
			ws.ropeSin = make([]float32, nf)
		}
		ws.ropeCos, ws.ropeSin = ws.ropeCos[:nf], ws.ropeSin[:nf]
		p := float32(pos)
		for i, f := range invFreq {
			s, c := math.Sincos(float64(p * f))
			ws.ropeCos[i], ws.ropeSin[i] = float32(c), float32(s)
		}
		ws.ropePos, ws.ropeValid = pos, true
	}
	if nf == 0 {
		return
	}
	x = x[len(x)-2*nf:]
	cos, sin := ws.ropeCos[:nf], ws.ropeSin[:nf]
	for i := range nf {
		c, s := cos[i], sin[i]
		if inverse {
			s = -s
		}
		a, b := x[2*i], x[2*i+1]
		x[2*i] = float32(a*c) - float32(b*s)
		x[2*i+1] = float32(b*c) + float32(a*s)
	}
}

func softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		if v > m || v != v {
			m = v
		}
	}
	if math.IsInf(float64(m), -1) {
		// Every value is -Inf: exp(x - max) is NaN, as in the reference.
		for i := range x {
			x[i] = float32(math.NaN())
		}
		return
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v) - float64(m))
		x[i] = float32(e)
		sum += e
	}
	inv := 1 / sum
	for i, v := range x {
		x[i] = float32(float64(v) * inv)
	}
}
