package gemma4

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
)

func caseDir(name string) string { return filepath.Join("..", "..", "testdata", "golden", name) }

// TestGolden: the reference case (transformers 5.17, float64) through every
// path of golden.Check: one full pass, prompt then one-token decode, the
// case's chunks, and the greedy continuation.
func TestGolden(t *testing.T) {
	dir := caseDir("gemma4/tiny")
	m, err := Load(dir, cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := golden.Check(context.Background(), m, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Paths {
		t.Logf("%s: max abs diff %.3g", p.Name, p.MaxAbs)
		if !p.OK() {
			t.Errorf("%s path: max abs diff %.3g exceeds %g", p.Name, p.MaxAbs, p.Tolerance)
		}
	}
	if !rep.GreedyOK() {
		t.Errorf("greedy ids %v, want %v", rep.Greedy, rep.Want)
	}
}
