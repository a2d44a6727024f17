package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// TestBranches: ops queued on three branches and the main one give the
// CPU's values, whether the step is launched directly, captured or
// replayed from its graph, and with a flush (a Write) in the middle of a
// branch. A scratch region released on a busy branch is not handed out
// again before its join, and is after it. In the emulator side streams run
// as late as their waits allow, so a missing fork or join shows as wrong
// values there.
func TestBranches(t *testing.T) {
	const rows, n = 4, 1024
	rng := rand.New(rand.NewPCG(7, 8))
	x := randFloats(rng, rows*n)
	w := randFloats(rng, n)

	// The CPU's: y_i = RMSNorm(x_i, w) for rows 0..2, then
	// y_3 = RMSNorm(x_3) + y_0 + y_1 + y_2 (AddRepeated).
	ref := func(be compute.Backend) []float32 {
		xt, _ := be.Alloc(compute.F32, rows, n)
		be.Write(xt, x)
		wt, _ := be.Vector(w)
		y := be.Scratch(compute.F32, rows, n)
		for i := range 3 {
			be.RMSNorm(y.Slice(i, i+1), xt.Slice(i, i+1), wt, 1e-6)
		}
		be.RMSNorm(y.Slice(3, 4), xt.Slice(3, 4), compute.Tensor{}, 1e-6)
		for i := range 3 {
			be.AddRepeated(y.Slice(3, 4), y.Slice(i, i+1), 1)
		}
		out := make([]float32, rows*n)
		if err := be.Read(out, y); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := ref(cpu.New(1))

	be := newBackend(t, Strict)
	xt, err := be.Alloc(compute.F32, rows, n)
	if err != nil {
		t.Fatal(err)
	}
	be.Write(xt, x)
	wt, err := be.Vector(w)
	if err != nil {
		t.Fatal(err)
	}
	spare, err := be.Alloc(compute.F32, 1, n)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 4 {
		be.ResetScratch(0)
		y := be.Scratch(compute.F32, rows, n)
		for i := range 3 {
			be.Branch(i + 1)
			be.RMSNorm(y.Slice(i, i+1), xt.Slice(i, i+1), wt, 1e-6)
			if i == 0 {
				// Released on a busy branch: not handed out again yet.
				mark := be.ScratchMark()
				a := be.Scratch(compute.F32, 1, n)
				be.ResetScratch(mark)
				if b := be.Scratch(compute.F32, 1, n); b.Off == a.Off {
					t.Fatalf("step %d: scratch at %d handed out again while branch 1 is open", step, a.Off)
				}
				be.ResetScratch(mark)
			}
			if step == 3 && i == 1 {
				be.Write(spare, w) // a flush in the middle of branch 2
			}
		}
		be.Branch(0)
		be.RMSNorm(y.Slice(3, 4), xt.Slice(3, 4), compute.Tensor{}, 1e-6)
		be.Join(0)
		mark := be.ScratchMark()
		a := be.Scratch(compute.F32, 1, n)
		be.ResetScratch(mark)
		if b := be.Scratch(compute.F32, 1, n); b.Off != a.Off {
			t.Fatalf("step %d: scratch at %d not handed out again after the join (got %d)", step, a.Off, b.Off)
		}
		be.ResetScratch(mark)
		for i := range 3 {
			be.AddRepeated(y.Slice(3, 4), y.Slice(i, i+1), 1)
		}
		got := make([]float32, rows*n)
		if err := be.Read(got, y); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-5*(1+math.Abs(float64(want[i])))) { // NaN fails too
				t.Fatalf("step %d: element %d is %g, the CPU's %g", step, i, got[i], want[i])
			}
		}
	}
	st := be.Stats()
	if st.Forks < 12 || st.Captures == 0 || st.GraphLaunches == 0 {
		t.Fatalf("stats %+v: want 12 forks and a captured graph replayed", st)
	}
}

// TestBackendBranches: a DeepSeek-V4 forward on branches, with its weights
// prefetched (off by default), gives the logits of one stream without
// prefetches bit for bit, on the full and the decode paths, strict and
// fast; so do the MoE's shared expert on the main stream, a step
// recorded whole (no Submit after each layer) and a step recorded as its
// first layer and the rest (submitFirst).
func TestBackendBranches(t *testing.T) {
	eachGoldenMode(t, []string{"testdata/golden/deepseek-v4/flash-ratios", "testdata/golden/deepseek-v4-extra/hc3-csa8"}, func(t *testing.T, dir string, c *golden.Case, mode Mode) {
		var on *Backend
		br := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { on = be; be.noPrefetch = false })
		one := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { be.SetBranches(false); be.noPrefetch = true })
		var sm *Backend
		shm := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { sm = be; be.noPrefetch = false; be.sharedOnMain = true })
		if on.Stats().Forks == 0 {
			t.Fatal("the forward queued nothing on a branch")
		}
		// The MoE's shared expert forks laneShared once a layer a step.
		if on.Stats().Forks <= sm.Stats().Forks {
			t.Fatalf("%d forks with the shared expert on its lane, %d without", on.Stats().Forks, sm.Stats().Forks)
		}
		samePaths(t, br, one, "on one stream")
		samePaths(t, br, shm, "with the shared expert on the main stream")
		// A recording a layer (Submit) or one a step: the same values.
		var ns *Backend
		one1 := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { ns = be; be.noPrefetch = false; be.noSubmit = true })
		if on.Stats().Flushes <= ns.Stats().Flushes {
			t.Fatalf("%d flushes with Submit, %d without", on.Stats().Flushes, ns.Stats().Flushes)
		}
		samePaths(t, br, one1, "with a recording a step")
		// The first layer alone, then the rest of the step in one recording.
		var sf *Backend
		first := goldenPaths(t, dir, c, mode, model.Options{}, func(be *Backend) { sf = be; be.noPrefetch = false; be.submitFirst = true })
		if f := sf.Stats().Flushes; f <= ns.Stats().Flushes || f >= on.Stats().Flushes {
			t.Fatalf("%d flushes with Submit after the first layer only, %d after each, %d without", f, on.Stats().Flushes, ns.Stats().Flushes)
		}
		samePaths(t, br, first, "with a recording of the first layer and one of the rest")
		fmt.Printf("BRANCHES %s %s: full and decode logits identical on branches and on one stream (%d forks; max abs from the golden f32 logits %.3g)\n",
			filepath.Base(dir), modeName(mode), on.Stats().Forks, golden.MaxAbsDiff(br[0], c.LogitsFull))
	})
}

// TestBackendSubmitFirst: a step of layers, each ending in Submit, is one
// flush a layer (the default: the last layer's leaves the read none), one
// in all (noSubmit), or two (submitFirst: the first layer, then the rest
// with the read), in
// steps launched directly, captured and replayed; the values are the same
// bits every way, and the CPU's.
func TestBackendSubmitFirst(t *testing.T) {
	const n, layers, steps = 1024, 5, 4
	rng := rand.New(rand.NewPCG(3, 33))
	x, w := randFloats(rng, n), randFloats(rng, n)
	// A layer: h += RMSNorm(h, w).
	run := func(be compute.Backend, sub func()) []float32 {
		xt, _ := be.Alloc(compute.F32, 1, n)
		be.Write(xt, x)
		wt, _ := be.Vector(w)
		h, g := be.Scratch(compute.F32, 1, n), be.Scratch(compute.F32, 1, n)
		be.RMSNorm(h, xt, compute.Tensor{}, 1e-6)
		for range layers {
			be.RMSNorm(g, h, wt, 1e-6)
			be.AddRepeated(h, g, 1)
			sub()
		}
		out := make([]float32, n)
		if err := be.Read(out, h); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := run(cpu.New(1), func() {})
	var first []float32
	for _, tc := range []struct {
		name    string
		set     func(*Backend)
		flushes int
	}{{"a flush a layer", func(*Backend) {}, layers}, {"one a step", func(be *Backend) { be.noSubmit = true }, 1},
		{"the first layer, then the rest", func(be *Backend) { be.submitFirst = true }, 2}} {
		be := newBackend(t, Strict)
		tc.set(be)
		xt, err := be.Alloc(compute.F32, 1, n)
		if err != nil {
			t.Fatal(err)
		}
		wt, err := be.Vector(w)
		if err != nil {
			t.Fatal(err)
		}
		for step := range steps {
			be.ResetScratch(0)
			mark := be.ScratchMark()
			be.Write(xt, x) // the step's input, uploaded before it (a flush of its own)
			f0 := be.Stats().Flushes
			h, g := be.Scratch(compute.F32, 1, n), be.Scratch(compute.F32, 1, n)
			be.RMSNorm(h, xt, compute.Tensor{}, 1e-6)
			for range layers {
				be.RMSNorm(g, h, wt, 1e-6)
				be.AddRepeated(h, g, 1)
				be.Submit()
			}
			got := make([]float32, n)
			if err := be.Read(got, h); err != nil {
				t.Fatal(err)
			}
			if f := be.Stats().Flushes - f0; f != int64(tc.flushes) {
				t.Fatalf("%s, step %d: %d flushes, want %d", tc.name, step, f, tc.flushes)
			}
			if first == nil {
				first = got
				for i := range got {
					if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-5*(1+math.Abs(float64(want[i])))) {
						t.Fatalf("%s: element %d is %g, the CPU's %g", tc.name, i, got[i], want[i])
					}
				}
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
					t.Fatalf("%s, step %d: element %d is %g, %g with a flush a layer", tc.name, step, i, got[i], first[i])
				}
			}
			be.ResetScratch(mark)
		}
		if st := be.Stats(); st.GraphLaunches == 0 {
			t.Fatalf("%s: no graph replayed (%+v)", tc.name, st)
		}
	}
}
