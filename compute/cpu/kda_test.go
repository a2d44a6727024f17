package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
)

// kdaCase is a random KDA problem over several spans.
type kdaCase struct {
	H, Dk, Dv    int
	lens, pos0   []int
	qkv, A, B    []float32
	negA, dtBias []float32
	S0           [][]float32 // [span] the initial state, [H, Dk, Dv]
}

func newKDACase(rng *rand.Rand, H, Dk, Dv int, lens, pos0 []int) *kdaCase {
	T := sum(lens)
	c := &kdaCase{H: H, Dk: Dk, Dv: Dv, lens: lens, pos0: pos0}
	c.qkv = randVec(rng, T*(2*H*Dk+H*Dv))
	c.A = randVec(rng, T*H*Dk)
	c.B = randVec(rng, T*H)
	for range H {
		// Decays from slow to fast, as A_log ~ U(log 0.05, 0).
		c.negA = append(c.negA, -float32(math.Exp(math.Log(0.05)+rng.Float64()*-math.Log(0.05))))
	}
	for range H * Dk {
		c.dtBias = append(c.dtBias, float32(rng.NormFloat64()*0.5-1))
	}
	for range lens {
		S := randVec(rng, H*Dk*Dv)
		for i := range S {
			S[i] *= 0.3
		}
		c.S0 = append(c.S0, S)
	}
	return c
}

// run applies KDARule to the case with its state in fresh paged slots and
// returns the outputs and final states.
func (c *kdaCase) run(be *Backend, rng *rand.Rand) ([]float32, [][]float32) {
	T := sum(c.lens)
	st := newTestPaged(be, rng, len(c.lens), c.H, c.Dk*c.Dv, 1, compute.SlotF32)
	for s, S := range c.S0 {
		for h := range c.H {
			st.set(s, h, S[h*c.Dk*c.Dv:(h+1)*c.Dk*c.Dv])
		}
	}
	out := make([]float32, T*c.H*c.Dv)
	W := 2*c.H*c.Dk + c.H*c.Dv
	be.KDARule(&compute.KDAArgs{
		Out: Wrap(out, T, c.H*c.Dv), QKV: Wrap(c.qkv, T, W), A: Wrap(c.A, T, c.H*c.Dk), B: Wrap(c.B, T, c.H),
		NegA: Wrap(c.negA, 1, c.H), DtBias: Wrap(c.dtBias, 1, c.H*c.Dk), State: st.p,
		H: c.H, Dk: c.Dk, Dv: c.Dv,
	}, spansTensor(c.lens, c.pos0))
	var states [][]float32
	for s := range c.lens {
		var S []float32
		for h := range c.H {
			S = append(S, st.get(s, h)...)
		}
		states = append(states, S)
	}
	return out, states
}

// naive is the recurrence of the definition in float64 (compute.KDAArgs):
// decay every key channel's row, read, update, read.
func (c *kdaCase) naive() ([]float64, [][]float64) {
	T := sum(c.lens)
	kd := c.H * c.Dk
	W := 2*kd + c.H*c.Dv
	out := make([]float64, T*c.H*c.Dv)
	var states [][]float64
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
	start := 0
	for si, n := range c.lens {
		S := make([]float64, len(c.S0[si]))
		for i, v := range c.S0[si] {
			S[i] = float64(v)
		}
		for t := start; t < start+n; t++ {
			row := c.qkv[t*W : (t+1)*W]
			for h := range c.H {
				q := norm(row[h*c.Dk:(h+1)*c.Dk], 1/math.Sqrt(float64(c.Dk)))
				k := norm(row[kd+h*c.Dk:kd+(h+1)*c.Dk], 1)
				v := row[2*kd+h*c.Dv : 2*kd+(h+1)*c.Dv]
				beta := 1 / (1 + math.Exp(-float64(c.B[t*c.H+h])))
				Sh := S[h*c.Dk*c.Dv : (h+1)*c.Dk*c.Dv]
				for i := range c.Dk {
					x := float64(c.A[t*kd+h*c.Dk+i]) + float64(c.dtBias[h*c.Dk+i])
					g := float64(c.negA[h]) * math.Log1p(math.Exp(x))
					for j := range c.Dv {
						Sh[i*c.Dv+j] *= math.Exp(g)
					}
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
					out[(t*c.H+h)*c.Dv+j] = o
				}
			}
		}
		states = append(states, S)
		start += n
	}
	return out, states
}

// TestKDARule: the recurrence against its float64 definition, over ragged
// spans continuing from nonzero states, for several shapes.
func TestKDARule(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	be := New(2)
	for _, sh := range []struct{ H, Dk, Dv int }{{4, 16, 16}, {3, 8, 12}, {2, 32, 8}, {1, 5, 7}} {
		c := newKDACase(rng, sh.H, sh.Dk, sh.Dv, []int{1, 70, 9, 130}, []int{5, 0, 60, 3})
		want, wantS := c.naive()
		got, gotS := c.run(be, rng)
		if d := maxDiff64(got, want); d > 2e-5 {
			t.Errorf("%+v: outputs differ from float64 by %.3g", sh, d)
		}
		for s := range gotS {
			if d := maxDiff64(gotS[s], wantS[s]); d > 2e-5 {
				t.Errorf("%+v: span %d's state differs from float64 by %.3g", sh, s, d)
			}
		}
	}
}

// TestKDARuleSplits: a sequence fed in any split of steps, each sharing
// its batch with an unrelated span, gives the bits of one feed, outputs
// and final state.
func TestKDARuleSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	be := New(2)
	const L = 150
	c := newKDACase(rng, 2, 8, 8, []int{L}, []int{0})
	W, kd := 2*c.H*c.Dk+c.H*c.Dv, c.H*c.Dk
	feeds := func(splits []int) ([]float32, []float32) {
		S := c.S0[0]
		var out []float32
		pos := 0
		for _, n := range splits {
			other := newKDACase(rng, c.H, c.Dk, c.Dv, []int{3}, []int{40})
			f := &kdaCase{H: c.H, Dk: c.Dk, Dv: c.Dv, lens: []int{3, n}, pos0: []int{40, pos},
				qkv:  append(slices.Clone(other.qkv), c.qkv[pos*W:(pos+n)*W]...),
				A:    append(slices.Clone(other.A), c.A[pos*kd:(pos+n)*kd]...),
				B:    append(slices.Clone(other.B), c.B[pos*c.H:(pos+n)*c.H]...),
				negA: c.negA, dtBias: c.dtBias, S0: [][]float32{other.S0[0], S}}
			o, st := f.run(be, rng)
			out = append(out, o[3*c.H*c.Dv:]...)
			S = st[1]
			pos += n
		}
		return out, S
	}
	o1, s1 := feeds([]int{L})
	for _, split := range [][]int{{1, 149}, {37, 1, 1, 100, 11}, {64, 86}, slices.Repeat([]int{1}, L)} {
		o, s := feeds(split)
		if !bitsEqual(o, o1) || !bitsEqual(s, s1) {
			t.Errorf("split %v differs from one feed", split)
		}
	}
}
