package qwen35

import (
	"context"
	"testing"

	"github.com/strata-inference/strata/golden"
)

// TestGolden runs both cases along the reference's three paths (one full
// pass, prefill then one token at a time, and the case's chunk sizes) and
// its greedy continuation, with the delta rule in either form: token by
// token (the default, on every path) and chunked in 64-token chunks
// aligned to positions (the reference's prefill form: a feed from
// position 0 is chunked exactly as the reference chunks it).
func TestGolden(t *testing.T) {
	for _, name := range goldenCases {
		for _, form := range []struct {
			name string
			o    Options
		}{{"recurrent", Options{}}, {"chunked", Options{ChunkedDeltaRule: true}}} {
			t.Run(name+"/"+form.name, func(t *testing.T) {
				m, c := loadCaseWith(t, name, form.o)
				rep, err := golden.Check(context.Background(), m, c)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range rep.Paths {
					t.Logf("%s: max abs diff %.3g (tolerance %g)", p.Name, p.MaxAbs, p.Tolerance)
					if !p.OK() {
						t.Errorf("%s path: max abs diff %.3g exceeds %g", p.Name, p.MaxAbs, p.Tolerance)
					}
				}
				if !rep.GreedyOK() {
					t.Errorf("greedy ids %v, want %v", rep.Greedy, rep.Want)
				}
			})
		}
	}
}
