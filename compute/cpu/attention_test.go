package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/strata-inference/strata/compute"
)

// attnCase is a SparseAttention problem: spans of tokens over a window ring
// and compressed entries in paged memory, with or without a selection.
type attnCase struct {
	H, d, W, rate int
	lens, pos0    []int
	ring, comp    *testPaged
	q, kv, sink   []float32
	sel, cnt      []int32 // nil: every entry
	K             int
	T             int
}

func newAttnCase(rng *rand.Rand, be *Backend, H, d, W, rate int, lens, pos0 []int, ringF, compF compute.SlotFormat, selK int) *attnCase {
	c := &attnCase{H: H, d: d, W: W, rate: rate, lens: lens, pos0: pos0, T: sum(lens)}
	N := len(lens)
	maxPos := 0
	for i := range lens {
		maxPos = max(maxPos, pos0[i]+lens[i])
	}
	c.ring = newTestPaged(be, rng, N, W, d, 3, ringF)
	c.comp = newTestPaged(be, rng, N, maxPos/rate+1, d, 5, compF)
	for s := range N {
		for k := range W {
			c.ring.set(s, k, randVec(rng, d))
		}
		for k := range c.comp.slots {
			c.comp.set(s, k, randVec(rng, d))
		}
	}
	c.q = randVec(rng, c.T*H*d)
	c.kv = randVec(rng, c.T*d)
	c.sink = randVec(rng, H)
	if selK > 0 {
		c.K = selK
		c.sel = make([]int32, c.T*selK)
		c.cnt = make([]int32, c.T)
		t := 0
		for s, n := range lens {
			for i := range n {
				ents := (pos0[s] + i + 1) / rate
				perm := rng.Perm(max(ents, 1))
				m := min(selK, ents)
				for k := range m {
					c.sel[t*selK+k] = int32(perm[k])
				}
				for k := m; k < selK; k++ {
					c.sel[t*selK+k] = -1
				}
				c.cnt[t] = int32(m)
				t++
			}
		}
	}
	return c
}

func (c *attnCase) args(out []float32) (*compute.AttentionArgs, compute.Spans) {
	a := &compute.AttentionArgs{
		Out: Wrap(out, c.T, c.H*c.d), Q: Wrap(c.q, c.T, c.H*c.d), KV: Wrap(c.kv, c.T, c.d),
		Window: c.ring.p, WindowSize: c.W, Rate: c.rate,
		Sink: Wrap(c.sink, 1, c.H), Heads: c.H, Dim: c.d, Scale: float32(1 / math.Sqrt(float64(c.d))),
	}
	if c.comp != nil {
		a.Compressed = c.comp.p
	}
	if c.sel != nil {
		a.Sel, a.N = WrapI32(c.sel, c.T, c.K), WrapI32(c.cnt, c.T, 1)
	}
	return a, spansTensor(c.lens, c.pos0)
}

// ref is the float64 attention of every token, and per output the sum of
// |p·v| (the scale of its rounding).
func (c *attnCase) ref() (want, l1 []float64) {
	H, d := c.H, c.d
	want = make([]float64, c.T*H*d)
	l1 = make([]float64, c.T*H*d)
	t := 0
	for s, n := range c.lens {
		for i := range n {
			p, p0 := c.pos0[s]+i, c.pos0[s]
			var keys [][]float32
			for k := max(0, p-c.W+1); k <= p; k++ {
				if k >= p0 {
					r := t - i + k - p0
					keys = append(keys, c.kv[r*d:(r+1)*d])
				} else {
					keys = append(keys, c.ring.get(s, k%c.W))
				}
			}
			if c.sel != nil {
				for _, e := range c.sel[t*c.K : t*c.K+int(c.cnt[t])] {
					keys = append(keys, c.comp.get(s, int(e)))
				}
			} else {
				for e := range (p + 1) / c.rate {
					keys = append(keys, c.comp.get(s, e))
				}
			}
			for h := range H {
				q := c.q[(t*H+h)*d : (t*H+h+1)*d]
				lg := make([]float64, len(keys))
				mx := float64(c.sink[h])
				for k, key := range keys {
					var v float64
					for j := range d {
						v += float64(q[j]) * float64(key[j])
					}
					lg[k] = v / math.Sqrt(float64(d))
					mx = max(mx, lg[k])
				}
				den := math.Exp(float64(c.sink[h]) - mx)
				for k := range lg {
					lg[k] = math.Exp(lg[k] - mx)
					den += lg[k]
				}
				o := want[(t*H+h)*d : (t*H+h+1)*d]
				e := l1[(t*H+h)*d : (t*H+h+1)*d]
				for k, key := range keys {
					for j := range d {
						o[j] += lg[k] / den * float64(key[j])
						e[j] += math.Abs(lg[k] / den * float64(key[j]))
					}
				}
			}
			t++
		}
	}
	return want, l1
}

// TestSparseAttention checks every family against the float64 definition
// on awkward shapes and every slot format, AVX2 against AVX-512 bit for bit,
// and that a token's output is the same bits alone, in a batch of decoding
// spans, and whatever the number of workers.
func TestSparseAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, tc := range []struct {
		H, d, W, rate int
		lens, pos0    []int
		ring, comp    compute.SlotFormat
		selK          int
	}{
		{4, 64, 16, 4, []int{1}, []int{70}, compute.SlotF32, compute.SlotF32, 0},
		{4, 64, 16, 4, []int{1, 1, 1}, []int{70, 3, 130}, compute.SlotBF16, compute.SlotF32, 5},
		{3, 20, 8, 4, []int{5, 2}, []int{0, 30}, compute.SlotF32, compute.SlotBF16, 3},
		{16, 128, 32, 8, []int{1, 1}, []int{300, 257}, compute.SlotFP8KV, compute.SlotFP8KV, 0},
		{2, 48, 10, 3, []int{7}, []int{12}, compute.SlotF32, compute.SlotF32, 2},
		{5, 16, 4, 128, []int{1}, []int{1000}, compute.SlotF32, compute.SlotF32, 0},
	} {
		name := fmt.Sprintf("H%d d%d W%d %v/%v sel%d lens%v", tc.H, tc.d, tc.W, tc.ring, tc.comp, tc.selK, tc.lens)
		c := newAttnCase(rng, New(1), tc.H, tc.d, tc.W, tc.rate, tc.lens, tc.pos0, tc.ring, tc.comp, tc.selK)
		want, l1 := c.ref()
		var outs [][]float32
		for _, k := range families() {
			out := make([]float32, c.T*c.H*c.d)
			a, sp := c.args(out)
			newWith(t, 2, k).SparseAttention(a, sp)
			checkClose(t, fmt.Sprintf("%v %s", k, name), out, want, l1, 2e-5)
			outs = append(outs, out)
			for _, threads := range []int{1, 3} {
				o2 := make([]float32, len(out))
				a, sp := c.args(o2)
				newWith(t, threads, k).SparseAttention(a, sp)
				if !bitsEqual(o2, out) {
					t.Errorf("%v %s: %d workers give other bits than 2", k, name, threads)
				}
			}
		}
		for i := 2; i < len(outs); i++ {
			if !bitsEqual(outs[i], outs[1]) {
				t.Errorf("%s: %v and %v differ", name, families()[i], families()[1])
			}
		}
		// Decoding spans: each token alone gives its bits in the batch.
		if slices.Max(tc.lens) == 1 {
			for _, k := range families() {
				be := newWith(t, 2, k)
				out := make([]float32, c.T*c.H*c.d)
				a, sp := c.args(out)
				be.SparseAttention(a, sp)
				for s := range tc.lens {
					one := *c
					one.lens, one.pos0, one.T = []int{1}, []int{tc.pos0[s]}, 1
					one.q = c.q[s*c.H*c.d : (s+1)*c.H*c.d]
					one.kv = c.kv[s*c.d : (s+1)*c.d]
					one.ring = &testPaged{be: c.ring.be, slots: c.ring.slots, p: c.ring.p}
					one.ring.p.Pages = sliceRows(c.ring.p.Pages, s)
					one.comp = &testPaged{be: c.comp.be, slots: c.comp.slots, p: c.comp.p}
					one.comp.p.Pages = sliceRows(c.comp.p.Pages, s)
					if c.sel != nil {
						one.sel, one.cnt = c.sel[s*c.K:(s+1)*c.K], c.cnt[s:s+1]
					}
					o1 := make([]float32, c.H*c.d)
					a, sp := one.args(o1)
					be.SparseAttention(a, sp)
					if !bitsEqual(o1, out[s*c.H*c.d:(s+1)*c.H*c.d]) {
						t.Errorf("%v %s: span %d alone differs from the batch", k, name, s)
					}
				}
			}
		}
	}
}

// sliceRows returns row r of an I32 table as a one-row table.
func sliceRows(tab compute.Tensor, r int) compute.Tensor {
	v := I32(tab)
	return WrapI32(slices.Clone(v[r*tab.Cols:(r+1)*tab.Cols]), 1, tab.Cols)
}

// TestSinkSoftmax: one head, d = 1, q = 1, keys 0 and ln 2, sink ln 3. The
// weights are 1/6 and 2/6 (the sink takes 3/6 and contributes no value), so
// o = (0·1 + ln2·2)/6. And two heads see the same keys with their own
// sinks: zero values give zero output.
func TestSinkSoftmax(t *testing.T) {
	ln2, ln3 := float32(math.Ln2), float32(math.Log(3))
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range families() {
		be := newWith(t, 1, k)
		for _, tc := range []struct {
			H       int
			q, kv   []float32
			sink    []float32
			want    float32
			wantAll bool
		}{
			{1, []float32{0, 1}, []float32{0, ln2}, []float32{ln3}, float32(2 * math.Ln2 / 6), false},
			{2, []float32{1, 1, 1, 1}, []float32{0, 0}, []float32{float32(math.Inf(-1)), 0}, 0, true},
		} {
			c := &attnCase{H: tc.H, d: 1, W: 4, rate: 4, lens: []int{2}, pos0: []int{0}, T: 2, q: tc.q, kv: tc.kv, sink: tc.sink}
			c.ring = newTestPaged(be, rng, 1, 4, 1, 4, compute.SlotF32)
			out := make([]float32, 2*tc.H)
			a, sp := c.args(out)
			be.SparseAttention(a, sp)
			o := out[tc.H:] // the second token sees both keys
			if tc.wantAll {
				if o[0] != 0 || o[1] != 0 {
					t.Errorf("%v: zero values must give zero output, got %v", k, o)
				}
			} else if math.Abs(float64(o[0]-tc.want)) > 1e-7 {
				t.Errorf("%v: o = %g, want %g", k, o[0], tc.want)
			}
		}
	}
}

// TestAccKeys: the values kernel of every family against float64 sums, the
// vector families bit for bit alike, and a group of four keys the same bits
// as the keys one at a time (the kernels' order is the keys' order).
func TestAccKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{1, 15, 16, 17, 48, 100, 512} {
		keys := make([][]float32, 4)
		ptrs := make([]unsafe.Pointer, 4)
		for i := range keys {
			keys[i] = randVec(rng, d)
			ptrs[i] = unsafe.Pointer(&keys[i][0])
		}
		p := randVec(rng, 4)
		y0 := randVec(rng, d)
		var got [][]float32
		for _, k := range families() {
			ks := kernelsFor(k)
			y := slices.Clone(y0)
			ks.accKeys(y, p, ptrs)
			y1 := slices.Clone(y0)
			for i := range 4 {
				ks.accKeys(y1, p[i:i+1], ptrs[i:i+1])
			}
			if !bitsEqual(y, y1) {
				t.Errorf("%v d=%d: four keys at once differ from one at a time", k, d)
			}
			for j := range d {
				w, e := float64(y0[j]), math.Abs(float64(y0[j]))
				for i := range 4 {
					w += float64(p[i]) * float64(keys[i][j])
					e += math.Abs(float64(p[i]) * float64(keys[i][j]))
				}
				if math.Abs(float64(y[j])-w) > 1e-6*e {
					t.Errorf("%v d=%d: y[%d] = %v, want %v", k, d, j, y[j], w)
				}
			}
			got = append(got, y)
		}
		for i := 2; i < len(got); i++ {
			if !bitsEqual(got[i], got[1]) {
				t.Errorf("d=%d: %v and %v differ", d, families()[i], families()[1])
			}
		}
	}
}

// TestIdxDots: the indexer kernel of every family against float64 sums,
// the vector families bit for bit alike, for 1 to 6 blocks of heads (the
// 4-block and 1-block routines).
func TestIdxDots(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dim := range []int{1, 7, 32, 128} {
		for blocks := 1; blocks <= 6; blocks++ {
			hp := 16 * blocks
			keys := make([][]float32, 4)
			var kp [4]unsafe.Pointer
			for i := range keys {
				keys[i] = randVec(rng, dim)
				kp[i] = unsafe.Pointer(&keys[i][0])
			}
			qt, c := randVec(rng, dim*hp), randVec(rng, hp)
			var want, l1 [4]float64
			for i := range 4 {
				for h := range hp {
					var v, a float64
					for k := range dim {
						v += float64(keys[i][k]) * float64(qt[k*hp+h])
						a += math.Abs(float64(keys[i][k]) * float64(qt[k*hp+h]))
					}
					want[i] += max(v, 0) * float64(c[h])
					l1[i] += a * math.Abs(float64(c[h]))
				}
			}
			var got [][4]float32
			for _, k := range families() {
				var acc [4]lanes
				var d lanes
				kernelsFor(k).idxDots(&acc, &kp, qt, hp, c, dim, blocks, &d)
				var s [4]float32
				for i := range 4 {
					s[i] = sumLanesGo(&acc[i])
					if math.Abs(float64(s[i])-want[i]) > 1e-5*l1[i] {
						t.Errorf("%v dim=%d blocks=%d key %d: %v, want %v", k, dim, blocks, i, s[i], want[i])
					}
				}
				got = append(got, s)
			}
			for i := 2; i < len(got); i++ {
				if got[i] != got[1] {
					t.Errorf("dim=%d blocks=%d: %v %v, %v %v", dim, blocks, families()[i], got[i], families()[1], got[1])
				}
			}
		}
	}
}

// TestIndexerSelect checks the selections of every family against float64
// scores (every selected entry within rounding of the k-th best, the
// selections in score order), all entries in order when a token has at most
// TopK, and that a token selects the same alone as in a batch and with any
// number of workers.
func TestIndexerSelect(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		nI, dI, rate, K int
		lens, pos0      []int
		f               compute.SlotFormat
	}{
		{8, 32, 4, 4, []int{1}, []int{200}, compute.SlotF32},
		{20, 64, 4, 16, []int{1, 1, 1}, []int{3000, 40, 700}, compute.SlotF32},
		{64, 128, 4, 32, []int{3, 1}, []int{500, 2100}, compute.SlotFP8Key},
		{3, 16, 2, 5, []int{9}, []int{0}, compute.SlotBF16},
	} {
		name := fmt.Sprintf("heads %d dim %d K %d %v lens %v", tc.nI, tc.dI, tc.K, tc.f, tc.lens)
		T := sum(tc.lens)
		maxEnt := 0
		for i := range tc.lens {
			maxEnt = max(maxEnt, (tc.pos0[i]+tc.lens[i])/tc.rate)
		}
		keys := newTestPaged(New(1), rng, len(tc.lens), maxEnt+1, tc.dI, 7, tc.f)
		for s := range tc.lens {
			for k := range keys.slots {
				keys.set(s, k, randVec(rng, tc.dI))
			}
		}
		q := randVec(rng, T*tc.nI*tc.dI)
		w := randVec(rng, T*tc.nI)
		run := func(be *Backend, lens, pos0 []int, q, w []float32, pages compute.Tensor) ([]int32, []int32) {
			T := sum(lens)
			sel, cnt := make([]int32, T*tc.K), make([]int32, T)
			kp := keys.p
			kp.Pages = pages
			be.IndexerSelect(&compute.IndexerArgs{
				Q: Wrap(slices.Clone(q), T, tc.nI*tc.dI), W: Wrap(slices.Clone(w), T, tc.nI), Keys: kp,
				Heads: tc.nI, Dim: tc.dI, Rate: tc.rate, TopK: tc.K, Sel: WrapI32(sel, T, tc.K), N: WrapI32(cnt, T, 1),
			}, spansTensor(lens, pos0))
			return sel, cnt
		}
		for _, k := range families() {
			be := newWith(t, 2, k)
			sel, cnt := run(be, tc.lens, tc.pos0, q, w, keys.p.Pages)
			tok := 0
			for s, n := range tc.lens {
				for i := range n {
					p := tc.pos0[s] + i
					ents := (p + 1) / tc.rate
					got := sel[tok*tc.K : (tok+1)*tc.K]
					if ents <= tc.K {
						for e := range tc.K {
							want := int32(e)
							if e >= ents {
								want = -1
							}
							if got[e] != want || cnt[tok] != int32(ents) {
								t.Fatalf("%v %s token %d: %v (%d), want every entry of %d", k, name, tok, got, cnt[tok], ents)
							}
						}
						tok++
						continue
					}
					// float64 scores and their rounding scale.
					sc, l1 := make([]float64, ents), make([]float64, ents)
					for e := range ents {
						key := keys.get(s, e)
						for h := range tc.nI {
							var v, a float64
							for j := range tc.dI {
								x := float64(q[(tok*tc.nI+h)*tc.dI+j]) * float64(key[j])
								v += x
								a += math.Abs(x)
							}
							c := float64(w[tok*tc.nI+h]) / math.Sqrt(float64(tc.nI)) / math.Sqrt(float64(tc.dI))
							sc[e] += max(v, 0) * c
							l1[e] += a * math.Abs(c)
						}
					}
					order := make([]int, ents)
					for e := range order {
						order[e] = e
					}
					slices.SortFunc(order, func(a, b int) int { return -cmpF(sc[a], sc[b]) })
					kth := sc[order[tc.K-1]]
					for r, e := range got {
						if sc[e] < kth-1e-5*l1[e] {
							t.Errorf("%v %s token %d: rank %d entry %d scores %g below the %d-th best %g", k, name, tok, r, e, sc[e], tc.K, kth)
						}
						if r > 0 && sc[e] > sc[got[r-1]]+1e-5*(l1[e]+l1[got[r-1]]) {
							t.Errorf("%v %s token %d: selections out of order at rank %d", k, name, tok, r)
						}
					}
					tok++
				}
			}
			for _, threads := range []int{1, 3} {
				s2, c2 := run(newWith(t, threads, k), tc.lens, tc.pos0, q, w, keys.p.Pages)
				if !slices.Equal(s2, sel) || !slices.Equal(c2, cnt) {
					t.Errorf("%v %s: %d workers select otherwise than 2", k, name, threads)
				}
			}
			if slices.Max(tc.lens) == 1 {
				for s := range tc.lens {
					s1, _ := run(be, []int{1}, []int{tc.pos0[s]}, q[s*tc.nI*tc.dI:(s+1)*tc.nI*tc.dI], w[s*tc.nI:(s+1)*tc.nI], sliceRows(keys.p.Pages, s))
					if !slices.Equal(s1, sel[s*tc.K:(s+1)*tc.K]) {
						t.Errorf("%v %s: span %d alone selects otherwise than in the batch", k, name, s)
					}
				}
			}
		}
	}
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
