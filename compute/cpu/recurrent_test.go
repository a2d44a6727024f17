package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// testPaged is a paged cache kind for tests: each of n spans gets `slots`
// slots of `width` values in format f, perPage to a page, on pages handed
// out in a shuffled order (so that no op can assume contiguity).
type testPaged struct {
	be    *Backend
	p     compute.Paged
	slots int
}

func newTestPaged(be *Backend, rng *rand.Rand, n, slots, width, perPage int, f compute.SlotFormat) *testPaged {
	sb := slotBytes(width, 0, f)
	sb = (sb + 3) / 4 * 4
	per := (slots + perPage - 1) / perPage
	pool, err := be.Alloc(compute.U8, n*per+1, perPage*sb)
	if err != nil {
		panic(err)
	}
	ids := make([]int32, n*per)
	for i := range ids {
		ids[i] = int32(i + 1)
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return &testPaged{be: be, slots: slots, p: compute.Paged{
		Pool: pool, Pages: WrapI32(ids, n, per), PerPage: perPage, SlotBytes: sb, Format: f, Width: width,
	}}
}

// get returns span s's slot k as float32 values.
func (tp *testPaged) get(s, k int) []float32 {
	return slices.Clone(spanSlots(tp.p, s).read(k, tp.p.Width, make([]float32, tp.p.Width)))
}

// set stores v in span s's slot k.
func (tp *testPaged) set(s, k int, v []float32) { spanSlots(tp.p, s).write(k, v) }

// spansTensor makes a span table and positions for spans of the given
// lengths, starting at the given positions, laid out in order.
func spansTensor(lens, pos0 []int) compute.Spans {
	var tab, pos []int32
	start := 0
	for i, n := range lens {
		tab = append(tab, int32(start), int32(n), int32(pos0[i]))
		for j := range n {
			pos = append(pos, int32(pos0[i]+j))
		}
		start += n
	}
	return compute.Spans{Tab: WrapI32(tab, len(lens), 3), Pos: WrapI32(pos, 1, len(pos))}
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func maxDiff64(a []float32, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-b[i]))
	}
	return d
}

// TestCausalConv checks the convolution with its state against a float64
// evaluation of the definition, for f32 and bf16 history, several spans
// continuing from random histories; and that feeding one span token by
// token gives the same bits as one feed.
func TestCausalConv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	be := New(2)
	for _, f := range []compute.SlotFormat{compute.SlotF32, compute.SlotBF16} {
		for _, sh := range []struct{ C, K int }{{7, 4}, {600, 4}, {33, 2}, {5, 5}} {
			lens := []int{5, 1, 2, 9}
			T := sum(lens)
			x := randVec(rng, T*sh.C)
			w := randVec(rng, sh.K*sh.C)
			st := newTestPaged(be, rng, len(lens), sh.K-1, sh.C, 2, f)
			hist := make([][][]float32, len(lens)) // [span][slot] as stored
			for s := range lens {
				for j := range sh.K - 1 {
					st.set(s, j, randVec(rng, sh.C))
					hist[s] = append(hist[s], st.get(s, j))
				}
			}
			y := make([]float32, T*sh.C)
			be.CausalConv(&compute.ConvArgs{Y: Wrap(y, T, sh.C), X: Wrap(x, T, sh.C), W: Wrap(w, sh.K, sh.C), State: st.p, SiLU: true}, spansTensor(lens, []int{3, 0, 7, 1}))
			start := 0
			for s, n := range lens {
				h := slices.Clone(hist[s])
				for i := range n {
					h = append(h, x[(start+i)*sh.C:(start+i+1)*sh.C])
				}
				for i := range n {
					for c := range sh.C {
						var acc float64
						for j := range sh.K {
							acc += float64(w[j*sh.C+c]) * float64(h[i+j][c])
						}
						want := acc / (1 + math.Exp(-acc))
						if got := float64(y[(start+i)*sh.C+c]); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) {
							t.Fatalf("%v C %d K %d span %d row %d ch %d: %g, want %g", f, sh.C, sh.K, s, i, c, got, want)
						}
					}
				}
				for j := range sh.K - 1 {
					want := h[n+j]
					if f == compute.SlotBF16 {
						b := make([]byte, 2*sh.C)
						quant.EncodeBF16(b, want)
						want = make([]float32, sh.C)
						quant.DecodeBF16(want, b)
					}
					if got := st.get(s, j); !bitsEqual(got, want) {
						t.Fatalf("%v C %d K %d span %d: history slot %d is not the input %d rows back", f, sh.C, sh.K, s, j, sh.K-1-j)
					}
				}
				start += n
			}
		}
	}
	// Split invariance: a sequence fed whole or token by token.
	const C, K, T = 100, 4, 11
	x, w := randVec(rng, T*C), randVec(rng, K*C)
	whole := newTestPaged(be, rng, 1, K-1, C, 3, compute.SlotF32)
	steps := newTestPaged(be, rng, 1, K-1, C, 1, compute.SlotF32)
	yw, ys := make([]float32, T*C), make([]float32, T*C)
	be.CausalConv(&compute.ConvArgs{Y: Wrap(yw, T, C), X: Wrap(x, T, C), W: Wrap(w, K, C), State: whole.p, SiLU: true}, spansTensor([]int{T}, []int{0}))
	for i := range T {
		be.CausalConv(&compute.ConvArgs{Y: Wrap(ys[i*C:], 1, C), X: Wrap(x[i*C:], 1, C), W: Wrap(w, K, C), State: steps.p, SiLU: true}, spansTensor([]int{1}, []int{i}))
	}
	if !bitsEqual(yw, ys) {
		t.Error("token-by-token convolution differs from one feed")
	}
	for j := range K - 1 {
		if !bitsEqual(whole.get(0, j), steps.get(0, j)) {
			t.Errorf("history slot %d differs between one feed and token by token", j)
		}
	}
}

// deltaCase is a random delta-rule problem over several spans.
type deltaCase struct {
	Hk, Hv, Dk, Dv int
	lens, pos0     []int
	qkv, A, B      []float32
	negA, dtBias   []float32
	S0             [][]float32 // [span] the initial state, [Hv, Dk, Dv]
}

func newDeltaCase(rng *rand.Rand, Hk, Hv, Dk, Dv int, lens, pos0 []int) *deltaCase {
	T := sum(lens)
	c := &deltaCase{Hk: Hk, Hv: Hv, Dk: Dk, Dv: Dv, lens: lens, pos0: pos0}
	c.qkv = randVec(rng, T*(2*Hk*Dk+Hv*Dv))
	c.A = randVec(rng, T*Hv)
	c.B = randVec(rng, T*Hv)
	for range Hv {
		// Decays from slow to fast, as A_log ~ U(log 0.05, log 1).
		c.negA = append(c.negA, -float32(math.Exp(math.Log(0.05)+rng.Float64()*-math.Log(0.05))))
		c.dtBias = append(c.dtBias, float32(rng.NormFloat64()*0.5))
	}
	for range lens {
		S := randVec(rng, Hv*Dk*Dv)
		for i := range S {
			S[i] *= 0.3
		}
		c.S0 = append(c.S0, S)
	}
	return c
}

// run applies op to the case with its state in fresh paged slots and
// returns the outputs and final states.
func (c *deltaCase) run(be *Backend, rng *rand.Rand, op func(*compute.DeltaArgs, compute.Spans)) ([]float32, [][]float32) {
	T := sum(c.lens)
	st := newTestPaged(be, rng, len(c.lens), c.Hv, c.Dk*c.Dv, 1, compute.SlotF32)
	for s, S := range c.S0 {
		for h := range c.Hv {
			st.set(s, h, S[h*c.Dk*c.Dv:(h+1)*c.Dk*c.Dv])
		}
	}
	out := make([]float32, T*c.Hv*c.Dv)
	W := 2*c.Hk*c.Dk + c.Hv*c.Dv
	op(&compute.DeltaArgs{
		Out: Wrap(out, T, c.Hv*c.Dv), QKV: Wrap(c.qkv, T, W), A: Wrap(c.A, T, c.Hv), B: Wrap(c.B, T, c.Hv),
		NegA: Wrap(c.negA, 1, c.Hv), DtBias: Wrap(c.dtBias, 1, c.Hv), State: st.p,
		Hk: c.Hk, Hv: c.Hv, Dk: c.Dk, Dv: c.Dv,
	}, spansTensor(c.lens, c.pos0))
	var states [][]float32
	for s := range c.lens {
		var S []float32
		for h := range c.Hv {
			S = append(S, st.get(s, h)...)
		}
		states = append(states, S)
	}
	return out, states
}

// naive is the recurrence of the definition in float64 (compute.DeltaArgs):
// decay, read, update, read.
func (c *deltaCase) naive() ([]float64, [][]float64) {
	T := sum(c.lens)
	W := 2*c.Hk*c.Dk + c.Hv*c.Dv
	kd := c.Hk * c.Dk
	out := make([]float64, T*c.Hv*c.Dv)
	var states [][]float64
	start := 0
	norm := func(x []float32, s float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		r := make([]float64, len(x))
		for i, v := range x {
			r[i] = float64(v) / math.Sqrt(ss+1e-6) * s
		}
		return r
	}
	for si, n := range c.lens {
		S := make([]float64, len(c.S0[si]))
		for i, v := range c.S0[si] {
			S[i] = float64(v)
		}
		for t := start; t < start+n; t++ {
			row := c.qkv[t*W : (t+1)*W]
			for h := range c.Hv {
				kh := h / (c.Hv / c.Hk)
				q := norm(row[kh*c.Dk:(kh+1)*c.Dk], 1/math.Sqrt(float64(c.Dk)))
				k := norm(row[kd+kh*c.Dk:kd+(kh+1)*c.Dk], 1)
				v := row[2*kd+h*c.Dv : 2*kd+(h+1)*c.Dv]
				x := float64(c.A[t*c.Hv+h] + c.dtBias[h])
				g := float64(c.negA[h]) * math.Log1p(math.Exp(x))
				beta := 1 / (1 + math.Exp(-float64(c.B[t*c.Hv+h])))
				Sh := S[h*c.Dk*c.Dv : (h+1)*c.Dk*c.Dv]
				for i := range Sh {
					Sh[i] *= math.Exp(g)
				}
				for j := range c.Dv {
					var p float64
					for i := range c.Dk {
						p += Sh[i*c.Dv+j] * k[i]
					}
					d := beta * (float64(v[j]) - p)
					for i := range c.Dk {
						Sh[i*c.Dv+j] += k[i] * d
					}
				}
				for j := range c.Dv {
					var o float64
					for i := range c.Dk {
						o += Sh[i*c.Dv+j] * q[i]
					}
					out[(t*c.Hv+h)*c.Dv+j] = o
				}
			}
		}
		states = append(states, S)
		start += n
	}
	return out, states
}

// TestDeltaRule: both forms against the float64 recurrence, over ragged
// spans continuing from random states, with key heads shared by several
// value heads and Dk ≠ Dv.
func TestDeltaRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	be := New(2)
	for _, sh := range []struct{ Hk, Hv, Dk, Dv int }{{2, 4, 16, 16}, {1, 3, 8, 12}, {2, 2, 32, 8}} {
		c := newDeltaCase(rng, sh.Hk, sh.Hv, sh.Dk, sh.Dv, []int{1, 70, 9, 130}, []int{5, 0, 60, 3})
		want, wantS := c.naive()
		for _, form := range []struct {
			name string
			op   func(*compute.DeltaArgs, compute.Spans)
			tol  float64
		}{
			{"recurrent", be.DeltaRule, 2e-5},
			{"chunked 64", func(a *compute.DeltaArgs, sp compute.Spans) { be.DeltaRuleChunked(a, sp, 64) }, 1e-4},
			{"chunked 16", func(a *compute.DeltaArgs, sp compute.Spans) { be.DeltaRuleChunked(a, sp, 16) }, 1e-4},
		} {
			got, gotS := c.run(be, rng, form.op)
			if d := maxDiff64(got, want); d > form.tol {
				t.Errorf("%+v %s: outputs differ from float64 by %.3g", sh, form.name, d)
			}
			for s := range gotS {
				if d := maxDiff64(gotS[s], wantS[s]); d > form.tol {
					t.Errorf("%+v %s: span %d's state differs from float64 by %.3g", sh, form.name, s, d)
				}
			}
		}
	}
}

// TestDeltaRuleSplits: the recurrent form gives the same bits however a
// sequence is split into feeds and whatever shares its batch; the chunked
// form does at splits on multiples of its chunk (counted from position 0).
func TestDeltaRuleSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	be := New(2)
	const L = 150
	whole := newDeltaCase(rng, 2, 4, 8, 8, []int{L}, []int{0})
	feeds := func(c *deltaCase, splits []int, op func(*compute.DeltaArgs, compute.Spans)) ([]float32, []float32) {
		// Each feed continues from the previous one's state; an unrelated
		// span shares every batch.
		S := c.S0[0]
		var out []float32
		W := 2*c.Hk*c.Dk + c.Hv*c.Dv
		pos := 0
		for _, n := range splits {
			other := newDeltaCase(rng, c.Hk, c.Hv, c.Dk, c.Dv, []int{3}, []int{40})
			f := &deltaCase{Hk: c.Hk, Hv: c.Hv, Dk: c.Dk, Dv: c.Dv, lens: []int{3, n}, pos0: []int{40, pos},
				qkv:  append(slices.Clone(other.qkv), c.qkv[pos*W:(pos+n)*W]...),
				A:    append(slices.Clone(other.A), c.A[pos*c.Hv:(pos+n)*c.Hv]...),
				B:    append(slices.Clone(other.B), c.B[pos*c.Hv:(pos+n)*c.Hv]...),
				negA: c.negA, dtBias: c.dtBias, S0: [][]float32{other.S0[0], S}}
			o, st := f.run(be, rng, op)
			out = append(out, o[3*c.Hv*c.Dv:]...)
			S = st[1]
			pos += n
		}
		return out, S
	}
	rec := be.DeltaRule
	ch := func(a *compute.DeltaArgs, sp compute.Spans) { be.DeltaRuleChunked(a, sp, 64) }
	o1, s1 := feeds(whole, []int{L}, rec)
	for _, split := range [][]int{{1, 149}, {37, 1, 1, 100, 11}, slices.Repeat([]int{1}, L)} {
		o, s := feeds(whole, split, rec)
		if !bitsEqual(o, o1) || !bitsEqual(s, s1) {
			t.Errorf("recurrent form split %v differs from one feed", split)
		}
	}
	c1, cs1 := feeds(whole, []int{L}, ch)
	for _, split := range [][]int{{64, 86}, {128, 22}, {64, 64, 22}} {
		o, s := feeds(whole, split, ch)
		if !bitsEqual(o, c1) || !bitsEqual(s, cs1) {
			t.Errorf("chunked form split %v differs from one feed", split)
		}
	}
}

// TestMatAcc checks the chunked delta rule's packed product against
// float64 sums, over shapes with odd rows and columns and strided operands.
func TestMatAcc(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, sh := range [][3]int{{1, 1, 1}, {2, 4, 4}, {5, 7, 9}, {64, 128, 128}, {3, 16, 6}} {
		n, k, cols := sh[0], sh[1], sh[2]
		os, xs, ms := cols+3, k+1, cols+2
		x := randVec(r, n*xs)
		m := randVec(r, k*ms)
		out := randVec(r, n*os)
		want := make([]float64, len(out))
		for i, v := range out {
			want[i] = float64(v)
		}
		for i := range n {
			for j := range cols {
				for a := range k {
					want[i*os+j] += float64(x[i*xs+a]) * float64(m[a*ms+j])
				}
			}
		}
		matAcc(out, os, x, xs, m, ms, n, k, cols, make([]float32, 4*k))
		if d := maxDiff64(out, want); d > 1e-4 {
			t.Errorf("%v: differs from float64 by %g", sh, d)
		}
	}
}
