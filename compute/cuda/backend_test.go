package cuda

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// goldenCases are every DeepSeek-V4 reference case and the shipped model.
var goldenCases = []string{
	"testdata/golden/deepseek-v4/tiny", "testdata/golden/deepseek-v4/flash-ratios", "testdata/golden/deepseek-v4/quantized",
	"testdata/golden/deepseek-v4-extra/hca12-groups4", "testdata/golden/deepseek-v4-extra/quantized-hca20",
	"testdata/golden/deepseek-v4-extra/hc3-csa8", "models/strata-kjv",
}

// repoPath finds rel under the repository root: the test runs in its
// package folder under go test, and from the root when its binary is run
// there (the GPU machine).
func repoPath(tb testing.TB, rel string) string {
	tb.Helper()
	for _, up := range []string{".", "..", "../.."} {
		p := filepath.Join(up, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	tb.Fatalf("%s not found from the package folder or the repository root", rel)
	return ""
}

// newBackend returns a Backend on the test device, closed with the test.
func newBackend(tb testing.TB, mode Mode) *Backend {
	tb.Helper()
	b, err := NewBackendOn(device(tb), mode)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil {
			tb.Error(err)
		}
	})
	return b
}

func loadOn(tb testing.TB, dir string, be compute.Backend) *deepseekv4.Model {
	tb.Helper()
	m, err := deepseekv4.Load(dir, be)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

// TestBackendGolden runs every case through every path of golden.Check:
// strict within the tolerance and greedy identical; fast greedy identical,
// its largest logit difference reported.
func TestBackendGolden(t *testing.T) {
	for _, name := range goldenCases {
		for _, mode := range []Mode{Strict, Fast} {
			t.Run(fmt.Sprintf("%s/%v", filepath.Base(name), modeName(mode)), func(t *testing.T) {
				rep := checkGolden(t, name, newBackend(t, mode))
				line := fmt.Sprintf("GOLDEN %s %s:", filepath.Base(name), modeName(mode))
				for _, p := range rep.Paths {
					line += fmt.Sprintf(" %s %.3g", p.Name, p.MaxAbs)
					if mode == Strict && !p.OK() {
						t.Errorf("%s path: max abs diff %.3g exceeds %g", p.Name, p.MaxAbs, golden.Tolerance)
					}
				}
				line += fmt.Sprintf(" greedy %v", okWord(rep.GreedyOK()))
				t.Log(line)
				fmt.Println(line)
				if !rep.GreedyOK() {
					t.Errorf("greedy ids %v, want %v", rep.Greedy, rep.Want)
				}
			})
		}
	}
}

// checkGolden loads the golden case name (a path under the repository
// root) on b and runs golden.Check on it.
func checkGolden(t *testing.T, name string, b *Backend) *golden.Report {
	t.Helper()
	dir := repoPath(t, name)
	m := loadOn(t, dir, b)
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := golden.Check(context.Background(), m, c)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// moeqCases are the golden cases whose FP4 experts moeq can take (widths
// of a multiple of 128).
var moeqCases = []string{"testdata/golden/deepseek-v4/quantized"}

// TestBackendGoldenMoEQ runs the moeq cases through golden.Check in Fast
// mode with moeq taking the experts wherever gemvx's experts' form would
// (moeQGX: at these few experts every decode step), on the integer dot
// products (moeq) and, where the device has wgmma (sm_90a), on the FP8
// tensor cores (moem): greedy identical, the largest logit difference
// reported, and the kernels must have run.
func TestBackendGoldenMoEQ(t *testing.T) {
	for _, name := range moeqCases {
		for _, kern := range []string{"moeq", "moem"} {
			t.Run(filepath.Base(name)+"/"+kern, func(t *testing.T) {
				b := newBackend(t, Fast)
				b.moeQGX, b.moeM = true, kern == "moem"
				if b.moeM && !b.k.fp8MMA {
					t.Skip("cuda: no wgmma on this device (sm_90a only)")
				}
				rep := checkGolden(t, name, b)
				line := fmt.Sprintf("GOLDEN %s fast %s:", filepath.Base(name), kern)
				for _, p := range rep.Paths {
					line += fmt.Sprintf(" %s %.3g", p.Name, p.MaxAbs)
				}
				n := b.moeqLaunches
				if b.moeM {
					n = b.moemLaunches
				}
				line += fmt.Sprintf(" greedy %v (%d %s launches)", okWord(rep.GreedyOK()), n, kern)
				t.Log(line)
				fmt.Println(line)
				if !rep.GreedyOK() {
					t.Errorf("greedy ids %v, want %v", rep.Greedy, rep.Want)
				}
				if n == 0 {
					t.Errorf("%s never ran", kern)
				}
			})
		}
	}
}

func modeName(m Mode) string {
	if m == Fast {
		return "fast"
	}
	return "strict"
}

func okWord(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

// TestBackendBatched runs engine.CheckBatched (concurrent requests, chunked
// prefill, a pool that forces preemption) in strict mode.
func TestBackendBatched(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(filepath.Base(name), func(t *testing.T) {
			dir := repoPath(t, name)
			m := loadOn(t, dir, newBackend(t, Strict))
			c, err := golden.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := engine.CheckBatched(context.Background(), m, c, engine.BatchedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ok := rep.OK() && rep.Preemptions > 0
			for _, r := range rep.Requests {
				if !r.OK() {
					t.Errorf("%s", r)
				}
			}
			if rep.Preemptions == 0 {
				t.Errorf("no preemption happened (pool of %d pages)", rep.PoolPages)
			}
			if rep.PagesLeft != 0 {
				t.Errorf("%d pages still held", rep.PagesLeft)
			}
			fmt.Printf("BATCHED %s: %d requests, %d preemptions, %s\n", filepath.Base(name), len(rep.Requests), rep.Preemptions, okWord(ok))
		})
	}
}

// run submits the requests to e (one at a time unless batch), steps it until
// idle, and returns every request's tokens and the logits of every position
// it computed.
func runRequests(t *testing.T, e *engine.Engine, reqs []engine.Request, batch bool) ([][]int32, []map[int][]float32) {
	t.Helper()
	outs := make([][]int32, len(reqs))
	lgs := make([]map[int][]float32, len(reqs))
	var streams []*engine.Stream
	drain := func() {
		for i := 0; !e.Idle(); i++ {
			if _, err := e.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
			if i > 100000 {
				t.Fatal("engine does not finish")
			}
		}
	}
	for i, r := range reqs {
		lg := map[int][]float32{}
		lgs[i] = lg
		r.OnLogits = func(p int, l []float32) { lg[p] = slices.Clone(l) }
		s, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
		if !batch {
			drain()
		}
	}
	drain()
	for i, s := range streams {
		toks, _, err := s.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = toks
	}
	return outs, lgs
}

// sameLogits fails unless every position both computed has identical logits
// (strict kernels are batch-invariant: bit for bit).
func sameLogits(t *testing.T, what string, got, want []map[int][]float32) {
	t.Helper()
	for i := range want {
		for p, w := range want[i] {
			if g, ok := got[i][p]; ok {
				if d := golden.MaxAbsDiff(g, w); d != 0 {
					t.Fatalf("%s: request %d position %d: logits differ by %g", what, i, p, d)
				}
			}
		}
	}
}

func testPrompt(n, seed, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*7 + seed*13 + 3) % vocab)
	}
	return p
}

// TestBackendInvariance: on the CUDA backend in strict mode, speculative
// decoding (MTP and n-gram, alone and batched) and prefix-cache hits give
// the tokens and the logits, bit for bit, of plain decoding on the same
// backend: the strict kernels are batch-invariant.
func TestBackendInvariance(t *testing.T) {
	dir := repoPath(t, "models/strata-kjv")
	m := loadOn(t, dir, newBackend(t, Strict))
	V := m.VocabSize()
	reqs := []engine.Request{
		{Prompt: testPrompt(23, 1, V), MaxTokens: 140},
		{Prompt: testPrompt(31, 2, V), MaxTokens: 140},
	}
	mk := func(cfg engine.Config) *engine.Engine {
		cfg.MaxBatchTokens, cfg.Pages, cfg.EOS = 256, 600, -1
		e, err := engine.New(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	want, wantL := runRequests(t, mk(engine.Config{NoPrefixCache: true}), reqs, false)
	for _, method := range []string{engine.SpecMTP, engine.SpecNgram} {
		for _, batch := range []bool{false, true} {
			e := mk(engine.Config{NoPrefixCache: true, Speculation: engine.Speculation{Method: method, MaxDraft: 4, Fixed: true}})
			got, gotL := runRequests(t, e, reqs, batch)
			what := fmt.Sprintf("%s batch=%v", method, batch)
			for i := range reqs {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("%s request %d: %v\nplain: %v", what, i, got[i], want[i])
				}
			}
			sameLogits(t, what, gotL, wantL)
			st := e.Stats()
			fmt.Printf("INVARIANCE %s: identical, %d drafted, %d accepted\n", what, st.SpecDrafted, st.SpecAccepted)
			if st.SpecAccepted == 0 || st.SpecAccepted == st.SpecDrafted {
				t.Errorf("%s: want both accepted and rejected drafts, got %d of %d", what, st.SpecAccepted, st.SpecDrafted)
			}
		}
	}
	// Prefix hits: each turn extends the last conversation.
	cached, plain := mk(engine.Config{}), mk(engine.Config{NoPrefixCache: true})
	conv := testPrompt(m.PrefixAlign()+9, 3, V)
	for turn := range 3 {
		r := []engine.Request{{Prompt: slices.Clone(conv), MaxTokens: 20}}
		a, la := runRequests(t, cached, r, false)
		b, lb := runRequests(t, plain, r, false)
		if !slices.Equal(a[0], b[0]) {
			t.Fatalf("turn %d: with prefix cache %v, without %v", turn, a[0], b[0])
		}
		sameLogits(t, fmt.Sprintf("prefix turn %d", turn), la, lb)
		conv = append(append(conv, a[0]...), testPrompt(7+turn, 10+turn, V)...)
	}
	hits := cached.Stats().PrefixHitTokens
	fmt.Printf("INVARIANCE prefix: identical over 3 turns, %d tokens hit\n", hits)
	if hits == 0 {
		t.Error("the prefix cache never hit")
	}
}

// TestBackendHostFloats: HostFloats gives zeroed page-locked memory that
// Read fills with the same values as a Go slice, and none when turned off.
func TestBackendHostFloats(t *testing.T) {
	be := newBackend(t, Strict)
	const n = 3*4096 + 7
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i)*0.25 - 1000
	}
	dev, err := be.Alloc(compute.F32, 1, n)
	if err != nil {
		t.Fatal(err)
	}
	be.Write(dev, src)
	pinned := be.HostFloats(n)
	if len(pinned) != n {
		t.Fatalf("HostFloats(%d) gave %d floats", n, len(pinned))
	}
	for i, v := range pinned {
		if v != 0 {
			t.Fatalf("HostFloats: element %d is %g, want 0", i, v)
		}
	}
	goMem := make([]float32, n)
	for i, dst := range [][]float32{pinned, goMem} {
		if err := be.Read(dst, dev); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(dst, src) {
			t.Fatalf("Read into %s memory differs from what was written", []string{"page-locked", "Go"}[i])
		}
	}
	be.noHostMem = true
	if v := be.HostFloats(n); v != nil {
		t.Fatalf("HostFloats with noHostMem gave %d floats", len(v))
	}
}
