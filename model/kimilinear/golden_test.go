package kimilinear

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

func caseDir(name string) string { return filepath.Join("..", "..", "testdata", "golden", name) }

// TestGolden: the reference case (transformers 5.17 KimiLinearForCausalLM,
// float64) through every path of golden.Check: one full pass, the prompt
// then one-token decode, the case's chunks (crossing the reference's
// 64-token KDA chunks), and the greedy continuation. Tolerance 2e-4 (the
// case's: the reference computes KDA in float32), greedy ids exact.
func TestGolden(t *testing.T) {
	dir := caseDir("kimi-linear/tiny")
	m, err := Load(dir, cpu.New(0), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, err := golden.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tolerance != 2e-4 {
		t.Fatalf("case tolerance %g, want 2e-4", c.Tolerance)
	}
	rep, err := golden.Check(context.Background(), m, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Paths) != 3 {
		t.Fatalf("%d paths checked, want full, decode and chunked", len(rep.Paths))
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
