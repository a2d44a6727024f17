package qwen35

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
)

func randVec(r *rand.Rand, n int, sd float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * sd)
	}
	return v
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d != d {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

func maxAbs(a []float32) float64 {
	m := 0.0
	for _, x := range a {
		m = max(m, math.Abs(float64(x)))
	}
	return m
}

// TestCausalConv1D checks the convolution against a float64 evaluation of
// its definition over the whole history, and that any split of the input
// into feeds gives the same bits and the same final state.
func TestCausalConv1D(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, K := range []int{1, 2, 4, 5} {
		const T, C = 23, 7
		x := randVec(r, T*C, 1)
		w := randVec(r, K*C, 0.5)
		want := make([]float64, T*C)
		for tt := range T {
			for c := range C {
				for j := range K {
					if src := tt + j - (K - 1); src >= 0 {
						want[tt*C+c] += float64(w[j*C+c]) * float64(x[src*C+c])
					}
				}
			}
		}
		var first []float32
		var firstState []float32
		for _, feeds := range [][]int{{T}, {1, 1, 1, 20}, {2, 3, 1, 7, 10}, ones(T)} {
			state := make([]float32, (K-1)*C)
			y := make([]float32, T*C)
			pos := 0
			for _, n := range feeds {
				CausalConv1D(y[pos*C:], x[pos*C:(pos+n)*C], n, C, K, w, state)
				pos += n
			}
			for i, v := range y {
				if math.Abs(float64(v)-want[i]) > 1e-5 {
					t.Fatalf("K %d feeds %v: y[%d] = %g, want %g", K, feeds, i, v, want[i])
				}
			}
			// The state is the last K-1 inputs.
			for i := range state {
				if state[i] != x[(T-(K-1))*C+i] {
					t.Fatalf("K %d feeds %v: state[%d] = %g, want %g", K, feeds, i, state[i], x[(T-(K-1))*C+i])
				}
			}
			if first == nil {
				first, firstState = y, state
				continue
			}
			if maxAbsDiff(first, y) != 0 || maxAbsDiff(firstState, state) != 0 {
				t.Errorf("K %d: feeds %v differ from one feed", K, feeds)
			}
		}
	}
}

func ones(n int) []int {
	f := make([]int, n)
	for i := range f {
		f[i] = 1
	}
	return f
}

// deltaInputs makes random inputs for a delta rule: q and k L2-normalised
// per head (q scaled by dk^-1/2), v of order 1, decays g in [-1.5, 0), beta
// in (0, 1).
func deltaInputs(r *rand.Rand, sh DeltaShape) (q, k, v, g, beta []float32) {
	q = randVec(r, sh.T*sh.Hk*sh.Dk, 1)
	k = randVec(r, sh.T*sh.Hk*sh.Dk, 1)
	l2NormRows(q, sh.Dk, float32(1/math.Sqrt(float64(sh.Dk))))
	l2NormRows(k, sh.Dk, 1)
	v = randVec(r, sh.T*sh.Hv*sh.Dv, 1)
	g = make([]float32, sh.T*sh.Hv)
	beta = make([]float32, sh.T*sh.Hv)
	for i := range g {
		g[i] = float32(-1.5 * r.Float64() * r.Float64())
		beta[i] = float32(r.Float64())
	}
	return
}

// naiveDelta is the recurrence of spec §4 in float64, written from the
// formulas, for one sequence: it returns the outputs and updates S.
func naiveDelta(S []float64, q, k, v, g, beta []float32, sh DeltaShape) []float64 {
	dk, dv := sh.Dk, sh.Dv
	o := make([]float64, sh.T*sh.Hv*dv)
	for t := range sh.T {
		for h := range sh.Hv {
			kh := h / (sh.Hv / sh.Hk)
			qt := q[(t*sh.Hk+kh)*dk:]
			kt := k[(t*sh.Hk+kh)*dk:]
			vt := v[(t*sh.Hv+h)*dv:]
			St := S[h*dk*dv:]
			d := math.Exp(float64(g[t*sh.Hv+h]))
			b := float64(beta[t*sh.Hv+h])
			for x := range dk * dv {
				St[x] *= d
			}
			for j := range dv {
				var pred float64
				for i := range dk {
					pred += St[i*dv+j] * float64(kt[i])
				}
				delta := b * (float64(vt[j]) - pred)
				for i := range dk {
					St[i*dv+j] += float64(kt[i]) * delta
				}
				var out float64
				for i := range dk {
					out += St[i*dv+j] * float64(qt[i])
				}
				o[(t*sh.Hv+h)*dv+j] = out
			}
		}
	}
	return o
}

func to64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func maxAbsDiff64(a []float32, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-b[i]))
	}
	return m
}

// TestGatedDeltaRule checks the recurrent and the chunked forms against the
// float64 recurrence, starting from a non-zero state, over lengths that end
// inside a chunk and cross several, with grouped heads (Hv = 2Hk), and that
// both forms leave the same state.
func TestGatedDeltaRule(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		sh    DeltaShape
		chunk int
	}{
		{DeltaShape{T: 1, Hk: 1, Hv: 1, Dk: 8, Dv: 8}, 64},
		{DeltaShape{T: 150, Hk: 2, Hv: 4, Dk: 16, Dv: 8}, 64},
		{DeltaShape{T: 64, Hk: 1, Hv: 3, Dk: 12, Dv: 20}, 64},
		{DeltaShape{T: 37, Hk: 2, Hv: 2, Dk: 16, Dv: 16}, 5},
	} {
		sh := tc.sh
		q, k, v, g, beta := deltaInputs(r, sh)
		S0 := randVec(r, sh.Hv*sh.Dk*sh.Dv, 0.3)
		wantS := to64(S0)
		wantO := naiveDelta(wantS, q, k, v, g, beta, sh)

		Srec := append([]float32(nil), S0...)
		orec := make([]float32, sh.T*sh.Hv*sh.Dv)
		GatedDeltaRule(orec, Srec, q, k, v, g, beta, sh)
		Schunk := append([]float32(nil), S0...)
		ochunk := make([]float32, sh.T*sh.Hv*sh.Dv)
		GatedDeltaRuleChunked(ochunk, Schunk, q, k, v, g, beta, sh, tc.chunk)

		for _, p := range []struct {
			name string
			o, S []float32
		}{{"recurrent", orec, Srec}, {"chunked", ochunk, Schunk}} {
			if d := maxAbsDiff64(p.o, wantO); d > 2e-5 {
				t.Errorf("%+v %s: output differs from the float64 recurrence by %g", sh, p.name, d)
			}
			if d := maxAbsDiff64(p.S, wantS); d > 2e-5 {
				t.Errorf("%+v %s: state differs from the float64 recurrence by %g", sh, p.name, d)
			}
		}
	}
}

// TestGatedDeltaRuleChunkedSplits: feeding the chunked form in pieces
// (continuing from the state each piece leaves) agrees with one feed; split
// at multiples of the chunk, bit for bit.
func TestGatedDeltaRuleChunkedSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	sh := DeltaShape{T: 200, Hk: 2, Hv: 4, Dk: 16, Dv: 16}
	q, k, v, g, beta := deltaInputs(r, sh)
	whole := make([]float32, sh.T*sh.Hv*sh.Dv)
	Swhole := make([]float32, sh.Hv*sh.Dk*sh.Dv)
	GatedDeltaRuleChunked(whole, Swhole, q, k, v, g, beta, sh, DeltaChunk)
	for _, feeds := range [][]int{{7, 64, 13, 7, 64, 13, 7, 25}, {70, 1, 1, 128}, ones(200), {64, 128, 8}, {128, 64, 1, 7}} {
		o := make([]float32, len(whole))
		S := make([]float32, len(Swhole))
		pos := 0
		for _, n := range feeds {
			p := DeltaShape{T: n, Pos: pos, Hk: sh.Hk, Hv: sh.Hv, Dk: sh.Dk, Dv: sh.Dv}
			qk, vo, gb := sh.Hk*sh.Dk, sh.Hv*sh.Dv, sh.Hv
			GatedDeltaRuleChunked(o[pos*vo:(pos+n)*vo], S, q[pos*qk:(pos+n)*qk], k[pos*qk:(pos+n)*qk],
				v[pos*vo:(pos+n)*vo], g[pos*gb:(pos+n)*gb], beta[pos*gb:(pos+n)*gb], p, DeltaChunk)
			pos += n
		}
		tol := 1e-5
		if feeds[0]%DeltaChunk == 0 && feeds[1]%DeltaChunk == 0 {
			tol = 0 // the first two splits are chunk-aligned, so is everything they cover
			n := feeds[0] + feeds[1]
			o, S = o[:n*sh.Hv*sh.Dv], nil
		}
		if d := maxAbsDiff(o, whole[:len(o)]); d > tol {
			t.Errorf("feeds %v: outputs differ from one feed by %g", feeds, d)
		}
		if S != nil {
			if d := maxAbsDiff(S, Swhole); d > tol {
				t.Errorf("feeds %v: state differs from one feed by %g", feeds, d)
			}
		}
	}
}

// TestRopeHalf checks the backend-based rotation against rotate-half
// written out: x_j' = x_j cos - x_{j+R/2} sin, x_{j+R/2}' = x_{j+R/2} cos +
// x_j sin for j < R/2, angles pos·θ^(-2j/R) in float64; channels past R
// unchanged.
func TestRopeHalf(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const rows, d, R = 6, 32, 8
	theta := 1e7
	x := randVec(r, rows*d, 1)
	pos := []int32{0, 1, 5, 1000, 77777, 3}
	got := append([]float32(nil), x...)
	inv := ropeInvFreq(R, theta)
	RopeHalf(cpu.New(1), got, rows, d, pos, inv, make([]float32, rows*R))
	for i := range rows {
		for j := range R / 2 {
			ang := float64(pos[i]) * math.Pow(theta, -float64(2*j)/R)
			c, s := math.Cos(ang), math.Sin(ang)
			a, b := float64(x[i*d+j]), float64(x[i*d+j+R/2])
			for _, w := range []struct {
				ch   int
				want float64
			}{{j, a*c - b*s}, {j + R/2, b*c + a*s}} {
				// The angle is rounded to float32 first (as the reference
				// does), an error growing with the position.
				tol := 1e-5 + 1e-7*float64(pos[i])
				if g := float64(got[i*d+w.ch]); math.Abs(g-w.want) > tol {
					t.Errorf("row %d channel %d: %g, want %g", i, w.ch, g, w.want)
				}
			}
		}
		for j := R; j < d; j++ {
			if got[i*d+j] != x[i*d+j] {
				t.Errorf("row %d channel %d changed", i, j)
			}
		}
	}
}

// TestAttend checks causal GQA attention against float64 softmax
// attention written out, for new tokens after cached ones.
func TestAttend(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	sh := AttnShape{N: 5, Past: 3, Hq: 4, Hkv: 2, D: 8}
	L := sh.Past + sh.N
	q := randVec(r, sh.N*sh.Hq*sh.D, 1)
	K := randVec(r, L*sh.Hkv*sh.D, 1)
	V := randVec(r, L*sh.Hkv*sh.D, 1)
	o := make([]float32, sh.N*sh.Hq*sh.D)
	Attend(cpu.New(1), o, q, K, V, sh, make([]float32, sh.Hq*L))
	for tt := range sh.N {
		for h := range sh.Hq {
			kv := h / (sh.Hq / sh.Hkv)
			n := sh.Past + tt + 1
			w := make([]float64, n)
			var mx, sum float64 = math.Inf(-1), 0
			for j := range n {
				for c := range sh.D {
					w[j] += float64(q[(tt*sh.Hq+h)*sh.D+c]) * float64(K[(j*sh.Hkv+kv)*sh.D+c])
				}
				w[j] /= math.Sqrt(float64(sh.D))
				mx = max(mx, w[j])
			}
			for j := range w {
				w[j] = math.Exp(w[j] - mx)
				sum += w[j]
			}
			for c := range sh.D {
				var want float64
				for j := range n {
					want += w[j] / sum * float64(V[(j*sh.Hkv+kv)*sh.D+c])
				}
				if g := o[(tt*sh.Hq+h)*sh.D+c]; math.Abs(float64(g)-want) > 1e-5 {
					t.Errorf("token %d head %d channel %d: %g, want %g", tt, h, c, g, want)
				}
			}
		}
	}
}

// TestMatAcc checks the packed product against float64 sums, over shapes
// with odd rows and columns and strided operands.
func TestMatAcc(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, sh := range [][3]int{{1, 1, 1}, {2, 4, 4}, {5, 7, 9}, {64, 128, 128}, {3, 16, 6}} {
		n, k, cols := sh[0], sh[1], sh[2]
		os, xs, ms := cols+3, k+1, cols+2
		x := randVec(r, n*xs, 1)
		m := randVec(r, k*ms, 1)
		out := randVec(r, n*os, 1)
		want := to64(out)
		for i := range n {
			for j := range cols {
				for a := range k {
					want[i*os+j] += float64(x[i*xs+a]) * float64(m[a*ms+j])
				}
			}
		}
		matAcc(out, os, x, xs, m, ms, n, k, cols, make([]float32, 4*k))
		if d := maxAbsDiff64(out, want); d > 1e-4 {
			t.Errorf("%v: differs from float64 by %g", sh, d)
		}
	}
}
