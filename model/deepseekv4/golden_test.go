package deepseekv4

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/strata-inference/strata/golden"
)

var goldenCases = []string{"tiny", "flash-ratios", "quantized"}

func TestGolden(t *testing.T) {
	for _, name := range goldenCases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "testdata", "golden", "deepseek-v4", name)
			m, err := Load(dir, naive{})
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
					t.Errorf("%s path: max abs diff %.3g exceeds %g", p.Name, p.MaxAbs, golden.Tolerance)
				}
			}
			if !rep.GreedyOK() {
				t.Errorf("greedy ids %v, want %v", rep.Greedy, rep.Want)
			}
		})
	}
}
