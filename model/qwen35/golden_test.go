package qwen35

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// goldenCases are the shared Qwen3.5 reference cases (transformers 5.17,
// float64 on CPU): dense and MoE.
var goldenCases = []string{"qwen3.5/tiny", "qwen3.5-moe/tiny"}

// caseTolerance reads a case's tolerance from its golden.json (1e-4 where
// absent, as check-golden does).
func caseTolerance(t *testing.T, dir string) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Tolerance *float64 `json:"tolerance"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	if j.Tolerance == nil {
		return golden.Tolerance
	}
	return *j.Tolerance
}

func loadCase(t *testing.T, name string) (*Model, *golden.Case, float64) {
	t.Helper()
	dir := caseDir(name)
	m, err := Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Vocab != m.VocabSize() {
		t.Fatalf("reference vocabulary %d, model %d", c.Vocab, m.VocabSize())
	}
	return m, c, caseTolerance(t, dir)
}

// feed runs ids through a fresh state in steps of the given sizes and
// returns the logits of every position and the final state.
func feed(t *testing.T, m *Model, ids []int32, feeds []int) ([]float32, *State) {
	t.Helper()
	st := m.NewState()
	var out []float32
	pos := 0
	for _, n := range feeds {
		lg, err := m.Feed(context.Background(), st, ids[pos:pos+n], model.AllLogits)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg...)
		pos += n
	}
	return out, st
}

// greedy prefills prompt and generates n tokens by argmax.
func greedy(t *testing.T, m *Model, prompt []int32, n int) []int32 {
	t.Helper()
	st := m.NewState()
	var out []int32
	in := prompt
	for range n {
		lg, err := m.Feed(context.Background(), st, in, model.LastLogits)
		if err != nil {
			t.Fatal(err)
		}
		next := golden.Argmax(lg)
		out = append(out, next)
		in = []int32{next}
	}
	return out
}

// TestGolden runs both cases along the reference's three paths (one full
// pass, prefill then one token at a time, and the case's chunk sizes) and
// its greedy continuation.
func TestGolden(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			m, c, tol := loadCase(t, name)
			L := len(c.InputIDs)
			for _, p := range []struct {
				name  string
				feeds []int
				want  []float32
			}{
				{"full", []int{L}, c.LogitsFull},
				{"decode", golden.DecodeFeeds(c.Prompt, L), c.LogitsDecode},
				{"chunked", c.Chunks, c.LogitsChunked},
			} {
				got, _ := feed(t, m, c.InputIDs, p.feeds)
				d := golden.MaxAbsDiff(got, p.want)
				t.Logf("%s: max abs diff %.3g (tolerance %g)", p.name, d, tol)
				if d > tol {
					t.Errorf("%s path: max abs diff %.3g exceeds %g", p.name, d, tol)
				}
			}
			g := greedy(t, m, c.InputIDs[:c.Prompt], len(c.Greedy))
			for i := range c.Greedy {
				if g[i] != c.Greedy[i] {
					t.Errorf("greedy ids %v, want %v", g, c.Greedy)
					break
				}
			}
		})
	}
}
