package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// TestRoPESplit: RoPESplit against its definition in float64 (channel j
// with j + n/2, only the first len(invFreq) pairs), one position per heads rows.
func TestRoPESplit(t *testing.T) {
	b := New(2)
	rng := rand.New(rand.NewPCG(1, 2))
	const heads, n = 3, 16
	pos := []int32{0, 7, 1234}
	inv := []float32{1, 0.3, 0.01} // 3 of the 8 pairs rotate
	x := randVec(rng, len(pos)*heads*n)
	want := make([]float64, len(x))
	for r := range len(pos) * heads {
		for i := range n {
			want[r*n+i] = float64(x[r*n+i])
		}
		for j, f := range inv {
			ang := float64(float32(pos[r/heads]) * f)
			a, c := float64(x[r*n+j]), float64(x[r*n+j+n/2])
			want[r*n+j] = a*math.Cos(ang) - c*math.Sin(ang)
			want[r*n+j+n/2] = c*math.Cos(ang) + a*math.Sin(ang)
		}
	}
	b.RoPESplit(Wrap(x, len(pos)*heads, n), WrapI32(pos, len(pos), 1), heads, Wrap(inv, 1, len(inv)))
	for i := range x {
		if d := math.Abs(float64(x[i]) - want[i]); d > 1e-5 {
			t.Fatalf("element %d: %g, want %g", i, x[i], want[i])
		}
	}
}

// kvCase is one attention layout to check.
type kvCase struct {
	name           string
	length         int // positions (default 17)
	window         int
	kFromV         bool
	format         compute.SlotFormat
	heads, kvHeads int
	dim, rot       int // rot: pairs rotated in derived keys
}

// kvSeq is a sequence's inputs at every position: queries, keys, values.
type kvSeq struct{ q, k, v []float32 }

func (c kvCase) width() int { return c.kvHeads * c.dim }

func (c kvCase) slotWidth() int {
	if c.kFromV {
		return c.width()
	}
	return 2 * c.width()
}

// roundTrip is what a slot of format f gives back of v.
func roundTrip(v []float32, f compute.SlotFormat) []float32 {
	if f == compute.SlotF32 {
		return append([]float32(nil), v...)
	}
	buf := make([]byte, 2*len(v))
	quant.EncodeBF16(buf, v)
	out := make([]float32, len(v))
	quant.DecodeBF16(out, buf)
	return out
}

func newKVSeq(rng *rand.Rand, c kvCase, L int) kvSeq {
	s := kvSeq{q: randVec(rng, L*c.heads*c.dim), v: roundTrip(randVec(rng, L*c.width()), c.format)}
	if !c.kFromV {
		s.k = roundTrip(randVec(rng, L*c.width()), c.format)
	}
	return s
}

// keyRope is the table of cosines and sines the derived keys rotate by.
func keyRope(L, m int, inv []float32) []float32 {
	out := make([]float32, L*2*m)
	for p := range L {
		splitAngles(out[p*2*m:p*2*m+m], out[p*2*m+m:(p+1)*2*m], int32(p), inv)
	}
	return out
}

// refAttention is the definition in float64: every position's output.
func refAttention(c kvCase, s kvSeq, L int, knorm, rope []float32) []float64 {
	H, G, d := c.heads, c.kvHeads, c.dim
	W := G * d
	key := func(j int) []float64 {
		k := make([]float64, W)
		if !c.kFromV {
			for i := range k {
				k[i] = float64(s.k[j*W+i])
			}
			return k
		}
		m := c.rot
		for g := range G {
			kh := k[g*d : (g+1)*d]
			for i := range kh {
				kh[i] = float64(knorm[i]) * float64(s.v[j*W+g*d+i])
			}
			for i := range m {
				cs, sn := float64(rope[j*2*m+i]), float64(rope[j*2*m+m+i])
				a, b := kh[i], kh[i+d/2]
				kh[i], kh[i+d/2] = a*cs-b*sn, b*cs+a*sn
			}
		}
		return k
	}
	out := make([]float64, L*H*d)
	for p := range L {
		lo := 0
		if c.window > 0 {
			lo = max(0, p-c.window+1)
		}
		for h := range H {
			g := h / (H / G)
			var l []float64
			mx := math.Inf(-1)
			for j := lo; j <= p; j++ {
				k := key(j)
				var dot float64
				for i := range d {
					dot += float64(s.q[(p*H+h)*d+i]) * k[g*d+i]
				}
				l = append(l, dot)
				mx = math.Max(mx, dot)
			}
			var sum float64
			for i := range l {
				l[i] = math.Exp(l[i] - mx)
				sum += l[i]
			}
			for j := lo; j <= p; j++ {
				for i := range d {
					out[(p*H+h)*d+i] += l[j-lo] / sum * float64(s.v[j*W+g*d+i])
				}
			}
		}
	}
	return out
}

// kvRun feeds sequences through StoreKV and SharedKVAttention, step by
// step: steps[i][s] tokens of sequence s in step i (0: not in the step).
// It returns every position's output per sequence.
func kvRun(t *testing.T, b *Backend, c kvCase, seqs []kvSeq, L int, steps [][]int, knorm, rope []float32) [][]float32 {
	t.Helper()
	H, d, W := c.heads, c.dim, c.width()
	N := len(seqs)
	slots := L
	if c.window > 0 {
		slots = c.window
	}
	slotBytes := 4 * c.slotWidth()
	if c.format == compute.SlotBF16 {
		slotBytes = 2 * c.slotWidth()
	}
	const perPage = 3
	pagesPer := (slots + perPage - 1) / perPage
	pool, _ := b.Alloc(compute.U8, N*pagesPer, perPage*slotBytes)
	table := make([]int32, N*pagesPer)
	for s := range N {
		for i := range pagesPer {
			table[s*pagesPer+i] = int32(N*pagesPer - 1 - (s*pagesPer + i)) // pages out of order
		}
	}
	paged := compute.Paged{Pool: pool, Pages: WrapI32(table, N, pagesPer), PerPage: perPage, SlotBytes: slotBytes, Format: c.format, Width: c.slotWidth()}
	out := make([][]float32, N)
	for s := range out {
		out[s] = make([]float32, L*H*d)
	}
	fed := make([]int, N)
	for _, step := range steps {
		var tab, pos []int32
		var q, k, v []float32
		var who []int
		T := 0
		for s, n := range step {
			if n == 0 {
				continue
			}
			tab = append(tab, int32(T), int32(n), int32(fed[s]))
			for i := range n {
				p := fed[s] + i
				pos = append(pos, int32(p))
				q = append(q, seqs[s].q[p*H*d:(p+1)*H*d]...)
				v = append(v, seqs[s].v[p*W:(p+1)*W]...)
				if !c.kFromV {
					k = append(k, seqs[s].k[p*W:(p+1)*W]...)
				}
			}
			who = append(who, s)
			T += n
		}
		stepTable := make([]int32, 0, len(who)*pagesPer)
		for _, s := range who {
			stepTable = append(stepTable, table[s*pagesPer:(s+1)*pagesPer]...)
		}
		pg := paged
		pg.Pages = WrapI32(stepTable, len(who), pagesPer)
		sp := compute.Spans{Tab: WrapI32(tab, len(who), 3), Pos: WrapI32(pos, T, 1)}
		o := make([]float32, T*H*d)
		args := compute.SharedKVArgs{Out: Wrap(o, T, H*d), Q: Wrap(q, T, H*d), V: Wrap(v, T, W), Cache: pg, Window: c.window,
			Heads: H, KVHeads: c.kvHeads, Dim: d, Scale: 1}
		var kt compute.Tensor
		if c.kFromV {
			args.KFromV = true
			args.KNorm = Wrap(knorm, 1, d)
			args.KeyRope = Wrap(rope, L, 2*c.rot)
		} else {
			kt = Wrap(k, T, W)
			args.K = kt
		}
		b.SharedKVAttention(&args, sp)
		b.StoreKV(pg, c.window, kt, Wrap(v, T, W), sp)
		r := 0
		for _, s := range who {
			n := step[s]
			copy(out[s][fed[s]*H*d:(fed[s]+n)*H*d], o[r*H*d:(r+n)*H*d])
			r += n
			fed[s] += n
		}
	}
	return out
}

// TestSharedKVAttention: sliding-window and full attention, with keys of
// their own or derived from the values, f32 and bf16 slots, against the
// float64 definition; and every split of the sequences into steps, alone
// or batched with another sequence, gives the same bits.
func TestSharedKVAttention(t *testing.T) {
	b := New(2)
	cases := []kvCase{
		{name: "window", window: 5, heads: 4, kvHeads: 2, dim: 8, format: compute.SlotF32},
		{name: "window-bf16", window: 5, heads: 4, kvHeads: 2, dim: 8, format: compute.SlotBF16},
		{name: "full", heads: 2, kvHeads: 2, dim: 6, format: compute.SlotF32},
		{name: "full-kfromv", heads: 4, kvHeads: 1, dim: 16, rot: 2, kFromV: true, format: compute.SlotF32},
		{name: "full-kfromv-bf16", heads: 2, kvHeads: 2, dim: 8, rot: 4, kFromV: true, format: compute.SlotBF16},
		{name: "window-kfromv", window: 4, heads: 2, kvHeads: 1, dim: 8, rot: 3, kFromV: true, format: compute.SlotF32},
		// Positions from 128 on read enough keys for the matmul kernels.
		{name: "full-kfromv-matmul", length: 160, heads: 8, kvHeads: 1, dim: 64, rot: 8, kFromV: true, format: compute.SlotF32},
		{name: "full-matmul-bf16", length: 280, heads: 8, kvHeads: 2, dim: 64, format: compute.SlotBF16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			L := c.length
			if L == 0 {
				L = 17
			}
			rng := rand.New(rand.NewPCG(7, uint64(c.dim)))
			seqs := []kvSeq{newKVSeq(rng, c, L), newKVSeq(rng, c, L)}
			knorm := randVec(rng, c.dim)
			var rope []float32
			if c.kFromV {
				inv := make([]float32, c.rot)
				for i := range inv {
					inv[i] = float32(math.Pow(100, -float64(i)/float64(c.rot)))
				}
				rope = keyRope(L, c.rot, inv)
			}
			one := kvRun(t, b, c, seqs[:1], L, [][]int{{L}}, knorm, rope)[0]
			want := refAttention(c, seqs[0], L, knorm, rope)
			for i, w := range want {
				if d := math.Abs(float64(one[i]) - w); d > 1e-5 {
					t.Fatalf("element %d (position %d): %g, want %g", i, i/(c.heads*c.dim), one[i], w)
				}
			}
			decode := make([][]int, L)
			for i := range decode {
				decode[i] = []int{1}
			}
			chunked := [][]int{{3}, {7}, {1}, {2}, {L - 13}}
			batched := [][]int{{2, 0}, {6, 5}, {1, 1}, {0, 7}, {L - 9, 1}, {0, L - 14}}
			for name, run := range map[string][]float32{
				"decode":  kvRun(t, b, c, seqs[:1], L, decode, knorm, rope)[0],
				"chunked": kvRun(t, b, c, seqs[:1], L, chunked, knorm, rope)[0],
				"batched": kvRun(t, b, c, seqs, L, batched, knorm, rope)[0],
			} {
				for i := range one {
					if run[i] != one[i] {
						t.Fatalf("%s: element %d is %g, one pass gives %g", name, i, run[i], one[i])
					}
				}
			}
			other := kvRun(t, b, c, seqs[1:], L, [][]int{{L}}, knorm, rope)[0]
			second := kvRun(t, b, c, seqs, L, batched, knorm, rope)[1]
			for i := range other {
				if other[i] != second[i] {
					t.Fatalf("batched second sequence: element %d is %g, alone %g", i, second[i], other[i])
				}
			}
		})
	}
}
