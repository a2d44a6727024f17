package deepseekv4

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
)

// goldenCases are the shared reference cases and the extra ones made with
// tools/golden/cases_extra.json (other head counts and dims, an HCA rate
// that is not a power of two, o_groups 1 and 4, hc_mult 3, CSA rate 8,
// quantized FP8 blocks that the output groups cut through).
var goldenCases = []string{
	"deepseek-v4/tiny", "deepseek-v4/flash-ratios", "deepseek-v4/quantized",
	"deepseek-v4-extra/hca12-groups4", "deepseek-v4-extra/quantized-hca20", "deepseek-v4-extra/hc3-csa8",
}

// TestGolden runs every case on the CPU backend, and the smallest cases also
// on the naive reference backend, which shares no kernel code with it.
func TestGolden(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) { checkGolden(t, caseDir(name), cpu.New(0)) })
	}
	for _, name := range []string{"deepseek-v4/tiny", "deepseek-v4/quantized"} {
		t.Run("naive/"+name, func(t *testing.T) { checkGolden(t, caseDir(name), newNaive()) })
	}
}

func caseDir(name string) string { return filepath.Join("..", "..", "testdata", "golden", name) }

func checkGolden(t *testing.T, dir string, be compute.Backend) {
	m, err := Load(dir, be)
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
