package server

import (
	"strings"
	"testing"

	"github.com/strata-inference/strata/server/loadgen"
)

// TestLoadRun: a short bounded load run (the helper behind strata bench
// serve) against a live server: 24 concurrent streams, 72 requests. Every
// stream is complete and consistent, /metrics agrees with what was sent,
// replayed requests give the same text, and the pool is whole at the end.
func TestLoadRun(t *testing.T) {
	h := newHarness(t, func(c *harnessConfig) { c.maxSeqs = 24 })
	rep, err := loadgen.Run(t.Context(), loadgen.Config{
		URL: h.url, Model: "strata-test", Concurrency: 24, Requests: 72, MinTokens: 2, MaxTokens: 12, Seed: 1, Verify: 12,
		CountPrompt: func(p string) int {
			n := len(h.tok.Encode(p, true))
			if h.tok.AddBOS() {
				n++
			}
			return n
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	t.Logf("load run:\n%s", b.String())
	if !rep.Passed() || !rep.MetricsChecked || rep.Verified != 12 {
		t.Errorf("load run failed")
	}
	if st := h.eng.Stats(); st.MaxBatchSeqs < 8 {
		t.Errorf("the engine batched at most %d sequences; the load did not overlap", st.MaxBatchSeqs)
	}
	h.waitIdle()
}
