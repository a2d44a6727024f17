package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// runVX runs gemvx on the G matrices ms (one table when G > 1) for T
// tokens of x ([T][G·K], group g's input at column g·K), into y
// ([T][G·R]), on gemvx's own entries (not gemvxp's).
func runVX(t *testing.T, ms []*compute.Matrix, x []float32, T int) []float32 {
	return runVXCols(t, ms, x, T, 0)
}

// runVXCols is runVX with Kernels.gemvxpCols set to cols for the call (0:
// gemvx's own entries whatever the shape).
func runVXCols(t *testing.T, ms []*compute.Matrix, x []float32, T, cols int) []float32 {
	t.Helper()
	k := device(t).Kernels()
	defer func(c int) { k.gemvxpCols = c }(k.gemvxpCols)
	k.gemvxpCols = cols
	G, R, K := len(ms), ms[0].Rows, ms[0].Cols
	return runGroup(t, ms, x, T, func(th *Thread, ys, xs Ptr, ws []*Matrix, tab Ptr) error {
		return k.gemvx(th, th.Stream(), ys, G*R, R, xs, G*K, K, T, ws[0], G, tab)
	})
}

// gemvxCases: partial blocks of 32 rows, K of one to many 64-column steps
// a warp, scale blocks narrower than a step.
var gemvxCases = []mmCase{
	{compute.FP8, 300, 512, 128, 128},
	{compute.FP8, 100, 1024, 128, 128},
	{compute.FP8, 129, 4096, 128, 128},
	{compute.FP8, 70, 192, 32, 16},
	{compute.BF16, 97, 1024, 0, 0},
	{compute.BF16, 64, 4096, 0, 0},
}

func skipNoGEMVX(t *testing.T) {
	t.Helper()
	if !device(t).Kernels().gemvxFits(&Matrix{DType: compute.FP8, Rows: 128, Cols: 128, BlockRows: 128, BlockCols: 128}) {
		t.Skip("cuda: no gemvx on this device (needs bfloat16 tensor cores)")
	}
}

// TestGEMVX checks gemvx against the exact product of the unrounded
// activations (the split leaves ~2^-17 of x; each mma of a warp's chain
// rounds once, taken as truncation, and so does each of the 8 warps'
// additions) and against the CPU, at 1 to 8 tokens; and that a token's
// result is the same bits at every position of 8 tokens as alone.
func TestGEMVX(t *testing.T) {
	skipNoGEMVX(t)
	be := cpu.New(2)
	for ci, c := range gemvxCases {
		t.Run(c.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 31))
			m, dense := testMatrix(rng, c.dt, c.rows, c.cols, c.br, c.bc)
			tight := float64(2*(c.cols/16)+8+16)*0x1p-22 + 0x1p-16
			var eight []float32
			x8 := randFloats(rng, 8*c.cols)
			for _, T := range []int{1, 3, 8} {
				got := runVX(t, []*compute.Matrix{m}, x8, T)
				want := make([]float32, T*c.rows)
				be.MatMulF32(want, x8, T, m)
				ref, mag := exactProducts(dense, x8, c.rows, c.cols, T, nil)
				checkProduct(t, got, want, ref, mag, tight, tight+2*gamma(c.cols))
				if T == 8 {
					eight = got
				}
			}
			for p := range 8 {
				alone := runVX(t, []*compute.Matrix{m}, x8[p*c.cols:], 1)
				if !slices.Equal(bitsOf(alone), bitsOf(eight[p*c.rows:(p+1)*c.rows])) {
					t.Errorf("token %d of 8 differs from the same token alone", p)
				}
			}
			// One tile of 16 rows a block and two: the same bits.
			k := device(t).Kernels()
			var tiles [2][]float32
			for mt := range 2 {
				k.gemvxM1 = mt + 1
				tiles[mt] = runVX(t, []*compute.Matrix{m}, x8, 8)
			}
			k.gemvxM1 = 0
			if !slices.Equal(bitsOf(tiles[0]), bitsOf(tiles[1])) {
				t.Errorf("16 rows a block differ from 32")
			}
		})
	}
}

// TestGEMVXGrouped checks gemvx's grouped form (strided inputs and
// outputs, the matrices from a table) against the CPU product of each
// group, and that an FP8 NaN code makes its row's outputs NaN as on the
// CPU.
func TestGEMVXGrouped(t *testing.T) {
	skipNoGEMVX(t)
	be := cpu.New(2)
	const G, R, K, T = 3, 136, 1024, 5
	rng := rand.New(rand.NewPCG(5, 33))
	ms, dense := make([]*compute.Matrix, G), make([][]float32, G)
	for g := range ms {
		ms[g], dense[g] = testMatrix(rng, compute.FP8, R, K, 128, 128)
	}
	ms[1].Data[7*K+300] = 0x7F // a NaN code in row 7 of group 1
	x := randFloats(rng, T*G*K)
	got := runVX(t, ms, x, T)
	xg, want := make([]float32, T*K), make([]float32, T*R)
	for g, m := range ms {
		for tok := range T {
			copy(xg[tok*K:(tok+1)*K], x[(tok*G+g)*K:])
		}
		be.MatMulF32(want, xg, T, m)
		for tok := range T {
			for r := range R {
				v, w := got[(tok*G+g)*R+r], want[tok*R+r]
				if g == 1 && r == 7 {
					if !math.IsNaN(float64(v)) {
						t.Errorf("group 1 token %d row 7 = %v, want NaN", tok, v)
					}
					continue
				}
				var mag float64
				for k := range K {
					mag += math.Abs(float64(xg[tok*K+k]) * float64(dense[g][r*K+k]))
				}
				if bound := (float64(2*K/16+8+16)*0x1p-22+0x1p-16)*mag + 2*gamma(K)*mag; !(math.Abs(float64(v-w)) <= bound) {
					t.Errorf("group %d token %d row %d = %v, CPU %v (bound %.3g)", g, tok, r, v, w, bound)
				}
			}
		}
	}
}

// TestBackendFastSmallBatches measures Fast mode where gemvx computes its
// products (decode steps of 2 to 8 tokens) on the shipped model against
// the CPU: B sequences, each a slice of the golden prompt, decoded token
// by token in one batch. It reports the mean KL divergence (CPU || CUDA),
// the largest logit difference and top-1 agreement, and fails beyond
// 1e-3 of difference (the fast golden figures are ~5e-5) or on a top-1
// disagreement whose CPU margin is above that.
func TestBackendFastSmallBatches(t *testing.T) {
	dir := repoPath(t, "models/strata-kjv")
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	be := newBackend(t, Fast)
	gpu := loadOn(t, dir, be)
	ref := loadOn(t, dir, cpu.New(2))
	// gemvx_moe_fp4_ring's experts (moeH off; the shipped model's 8
	// experts take them from batch 2), then the float16 tensor cores'
	// (moeH, the default).
	for _, job := range []struct {
		B int
		h bool
	}{{2, false}, {4, false}, {8, false}, {2, true}, {8, true}} {
		B := job.B
		be.moeH = job.h
		tag := map[bool]string{false: "FASTSMALL", true: "FASTSMALL moeH"}[job.h]
		const steps = 24
		var kl, maxAbs float64
		agree, n := 0, 0
		got, want := decodeBatch(t, gpu, c.InputIDs, B, steps), decodeBatch(t, ref, c.InputIDs, B, steps)
		V := len(want[0]) / B
		for p := range steps {
			for i := range B {
				g, w := got[p][i*V:(i+1)*V], want[p][i*V:(i+1)*V]
				maxAbs = max(maxAbs, golden.MaxAbsDiff(g, w))
				kl += klDiv(w, g)
				n++
				wb, gb := golden.Argmax(w), golden.Argmax(g)
				if wb == gb {
					agree++
				} else if margin := float64(w[wb] - w[gb]); margin > 1e-3 {
					t.Errorf("%s batch %d step %d seq %d: top token %d, CPU %d by a margin of %.3g", tag, B, p, i, gb, wb, margin)
				}
			}
		}
		if !(maxAbs <= 1e-3) {
			t.Errorf("%s batch %d: largest logit difference %.3g", tag, B, maxAbs)
		}
		fmt.Printf("%s batch %d: %d positions, mean KL %.3g, max abs %.3g, top-1 agreement %.2f%%\n", tag, B, n, kl/float64(n), maxAbs, 100*float64(agree)/float64(n))
	}
	be.moeH = true
}

// decodeBatch decodes B sequences token by token in one batch for steps
// steps, sequence i fed ids from offset 5·i on, and returns each step's
// logits (B rows).
func decodeBatch(t *testing.T, m *deepseekv4.Model, ids []int32, B, steps int) [][]float32 {
	t.Helper()
	pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), steps+4, B)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	batch := &model.Batch{Tokens: make([]int32, B)}
	for i := range B {
		s, err := m.NewSeq(pool)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Release()
		batch.Spans = append(batch.Spans, model.Span{Seq: s, Start: i, Len: 1, Logits: model.LastLogits})
	}
	var out [][]float32
	for p := range steps {
		for i := range B {
			batch.Tokens[i] = ids[(p+5*i)%len(ids)]
		}
		lg, err := m.Forward(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(lg))
	}
	return out
}

// klDiv is KL(softmax(p) || softmax(q)) of two logit rows, in float64.
func klDiv(p, q []float32) float64 {
	lse := func(v []float32) float64 {
		m := math.Inf(-1)
		for _, x := range v {
			m = max(m, float64(x))
		}
		s := 0.0
		for _, x := range v {
			s += math.Exp(float64(x) - m)
		}
		return m + math.Log(s)
	}
	lp, lq := lse(p), lse(q)
	var kl float64
	for i := range p {
		a := float64(p[i]) - lp
		kl += math.Exp(a) * (a - (float64(q[i]) - lq))
	}
	return kl
}

// TestBackendMoEGEMVX checks the Fast FP4 experts in tiles of 2 to 8
// pairs with moeH off (gemvx_moe_fp4_ring) against the CPU backend's MoE,
// that gemvx_moe_fp4 and the ring's other entries give the ring's bits,
// that a token's output is the same bits in a batch of 16 as in a batch
// of 10 (its pairs in other tiles, at other columns), and that tiles of
// one pair give gemvx_moe_fp4's bits and the CPU's values.
func TestBackendMoEGEMVX(t *testing.T) {
	skipNoGEMVX(t)
	be, rng, run := newFP4MoE(t)
	be.moeH = false // gemvx_moe_fp4 and its ring (moeH takes their place by default)
	ref := cpu.New(2)
	const D = fp4MoED
	const T = 16 // 6 pairs an expert on average: tiles of up to 8
	x := randFloats(rng, T*D)
	got, want := run(be, x, T), run(ref, x, T)
	rms := rmsOf(want)
	// As TestBackendMoEFast: each product errs by about 2^-16·Σ|w||x|, a
	// pair sent to a wrong expert or row by the rms itself.
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); !(d <= 2e-3*(math.Abs(float64(want[i]))+rms)) {
			t.Fatalf("y[%d] = %v, CPU %v (rms %.3g)", i, got[i], want[i], rms)
		}
	}
	// 10 tokens: their pairs in other tiles and columns, and the shared
	// expert still on gemmx (more than 8 tokens), which is batch-invariant.
	if part := run(be, x, 10); !slices.Equal(bitsOf(part), bitsOf(got[:10*D])) {
		t.Errorf("the first 10 tokens alone differ from the same tokens in a batch of %d", T)
	}
	if be.gvxrV == 0 {
		t.Fatal("gemvx_moe_fp4_ring is not the default")
	}
	for v := range gvxrStages {
		if v == gvxrVDefault {
			continue
		}
		be.gvxrV = v // gemvx_moe_fp4 (0) and the ring of 3 stages: the same bits
		other := run(be, x, T)
		if !slices.Equal(bitsOf(other), bitsOf(got)) {
			t.Errorf("gvxrV %d (ring of %d stages) differs from the default", v, gvxrStages[v])
		}
		be.gemvxMoeU4 = true // 4 steps in flight a lane: the same bits
		if v == 0 && !slices.Equal(bitsOf(run(be, x, T)), bitsOf(got)) {
			t.Errorf("the _u4 entry differs from the default")
		}
		be.gemvxMoeU4 = false
	}
	be.gvxrV = gvxrVDefault
	// Tiles of one pair (gemvxMoeMinPT 1; tokens 0 and 1 alone: 6 pairs
	// on up to 6 experts): the ring against gemvx_moe_fp4 and the CPU. (Not
	// against the batch of 16: the shared expert takes other kernels below
	// 9 tokens.)
	be.gemvxMoeMinPT = 1
	two := run(be, x, 2)
	be.gvxrV = 0
	twoRef := run(be, x, 2)
	be.gvxrV, be.gemvxMoeMinPT = gvxrVDefault, 2
	if !slices.Equal(bitsOf(two), bitsOf(twoRef)) {
		t.Errorf("tiles of one pair: the ring differs from gemvx_moe_fp4")
	}
	for i, w := range run(ref, x, 2) {
		if d := math.Abs(float64(two[i] - w)); !(d <= 2e-3*(math.Abs(float64(w))+rms)) {
			t.Fatalf("2 tokens: y[%d] = %v, CPU %v (rms %.3g)", i, two[i], w, rms)
		}
	}
	// And the float32 kernels (gemvxMoeOff) agree with the CPU as closely.
	be.gemvxMoeOff = true
	defer func() { be.gemvxMoeOff = false }()
	off := run(be, x, T)
	if slices.Equal(bitsOf(off), bitsOf(got)) {
		t.Fatal("the float32 kernels gave gemvx_moe's bits: it computed nothing")
	}
	var dOn, dOff float64
	for i := range got {
		dOn = max(dOn, math.Abs(float64(got[i]-want[i])))
		dOff = max(dOff, math.Abs(float64(off[i]-want[i])))
	}
	fmt.Printf("MOEGEMVX: max abs from the CPU %.3g (float32 kernels %.3g, rms %.3g)\n", dOn, dOff, rms)
}

// TestBackendMoEH checks the Fast FP4 experts on the float16 tensor cores
// (moeH: gvxh_split and gemvx_moe_fp4_h) against the CPU backend's MoE,
// with tokens of very large and very small activations among them (the
// rows' power-of-two scales), in tiles of 2 to 8 pairs and of one pair;
// that a token's output is the same bits in a batch of 16 as in a batch
// of 10 (its pairs in other tiles, at other columns).
func TestBackendMoEH(t *testing.T) {
	skipNoGEMVX(t)
	be, rng, run := newFP4MoE(t)
	ref := cpu.New(2)
	const D = fp4MoED
	const T = 16 // 6 pairs an expert on average: tiles of up to 8
	x := randFloats(rng, T*D)
	for i := range D {
		x[3*D+i] *= 1e5 // token 3: beyond float16's range unscaled
		x[5*D+i] *= 1e-5
	}
	check := func(name string, got, want []float32) {
		t.Helper()
		for tok := range len(want) / D {
			rms := rmsOf(want[tok*D : (tok+1)*D])
			// As TestBackendMoEGEMVX (the shared expert's split products
			// err most), with each token's own rms.
			for i := tok * D; i < (tok+1)*D; i++ {
				if d := math.Abs(float64(got[i] - want[i])); !(d <= 2e-3*(math.Abs(float64(want[i]))+rms)) {
					t.Fatalf("%s: y[%d] (token %d) = %v, CPU %v (rms %.3g)", name, i, tok, got[i], want[i], rms)
				}
			}
		}
	}
	want := run(ref, x, T)
	be.moeH = false
	off := run(be, x, T) // gemvx_moe_fp4_ring
	be.moeH = true
	got := run(be, x, T)
	check("tiles of up to 8", got, want)
	if slices.Equal(bitsOf(off), bitsOf(got)) {
		t.Fatal("moeH gave gemvx_moe_fp4_ring's bits: it did not run")
	}
	if part := run(be, x, 10); !slices.Equal(bitsOf(part), bitsOf(got[:10*D])) {
		t.Errorf("the first 10 tokens alone differ from the same tokens in a batch of %d", T)
	}
	// Against the float32 expert kernels (gemvxMoeOff; the same shared
	// expert, so the difference is the routed experts' alone): within
	// 1e-4 of each token's rms, where the float16 split carries x to
	// about 2^-22 (a wrong pairing of codes and columns errs by O(1)).
	be.gemvxMoeOff = true
	exact := run(be, x, T)
	be.gemvxMoeOff = false
	var worst float64
	for tok := range T {
		rms := rmsOf(exact[tok*D : (tok+1)*D])
		for i := tok * D; i < (tok+1)*D; i++ {
			d := math.Abs(float64(got[i]-exact[i])) / (math.Abs(float64(exact[i])) + rms)
			worst = max(worst, d)
			if !(d <= 1e-4) {
				t.Fatalf("y[%d] (token %d) = %v, float32 experts %v (rms %.3g)", i, tok, got[i], exact[i], rms)
			}
		}
	}
	fmt.Printf("MOEH: against the float32 experts, at most %.3g of |y| + the token's rms\n", worst)
	// Tiles of one pair (2 tokens, 6 pairs; the shared expert on other
	// kernels below 9 tokens, so against the CPU only).
	be.gemvxMoeMinPT = 1
	defer func() { be.gemvxMoeMinPT = 2 }()
	check("tiles of one pair", run(be, x, 2), run(ref, x, 2))
	var dOn, dOff float64
	for i := range got {
		dOn = max(dOn, math.Abs(float64(got[i]-want[i])))
		dOff = max(dOff, math.Abs(float64(off[i]-want[i])))
	}
	fmt.Printf("MOEH: max abs from the CPU %.3g (gemvx_moe_fp4_ring %.3g)\n", dOn, dOff)
}

// fp4MoED is the width of newFP4MoE's layer.
const fp4MoED = 256

// newFP4MoE uploads the MoE layer of TestBackendMoEGEMVX and
// TestBackendMoEH to a Fast backend: 8 FP4 experts of 384 over a width of
// fp4MoED, top 3 by sqrt-softplus, an FP8 shared expert. run computes the
// layer on m (be or a CPU backend) for the first T rows of x; rng goes on
// from the weights' draws.
func newFP4MoE(t *testing.T) (be *Backend, rng *rand.Rand, run func(m compute.Backend, x []float32, T int) []float32) {
	t.Helper()
	dev := device(t)
	be, err := NewBackendOn(dev, Fast)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	const E, D, I, K = 8, fp4MoED, 384, 3
	rng = rand.New(rand.NewPCG(9, 41))
	mk := func(dt compute.DType, rows, cols int) *compute.Matrix {
		m, _ := testMatrix(rng, dt, rows, cols, 128, 128)
		if err := be.Upload(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	args := compute.MoEArgs{Gate: mk(compute.F32, E, D), K: K, Scoring: compute.SqrtSoftplus, RoutedScale: 1.5, Limit: 7}
	for range E {
		args.Experts = append(args.Experts, compute.SwiGLU{W1: mk(compute.FP4, I, D), W2: mk(compute.FP4, D, I), W3: mk(compute.FP4, I, D)})
	}
	args.Shared = compute.SwiGLU{W1: mk(compute.FP8, I, D), W2: mk(compute.FP8, D, I), W3: mk(compute.FP8, I, D)}
	bias := randFloats(rng, E)
	run = func(m compute.Backend, x []float32, T int) []float32 {
		a := args
		var err error
		if a.Bias, err = m.Vector(bias); err != nil {
			t.Fatal(err)
		}
		xt, _ := m.Alloc(compute.F32, T, D)
		yt, _ := m.Alloc(compute.F32, T, D)
		tt, _ := m.Alloc(compute.I32, 1, T)
		defer m.Free(xt)
		defer m.Free(yt)
		defer m.Free(tt)
		m.Write(xt, x[:T*D])
		m.Write(tt, make([]int32, T))
		m.MoE(yt, xt, tt, &a)
		y := make([]float32, T*D)
		if err := m.Read(y, yt); err != nil {
			t.Fatal(err)
		}
		return y
	}
	return be, rng, run
}

// rmsOf is the root mean square of v, in float64.
func rmsOf(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s / float64(len(v)))
}
