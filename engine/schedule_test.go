package engine

import (
	"context"
	"testing"
	"time"

	"github.com/strata-inference/strata/golden"
)

// TestFairScheduling: with a step-time target, a running stream gets a
// token every step while a long prompt prefills, and a short prompt that
// arrives during that prefill gets its first token within a few steps;
// first come, first served makes the short prompt wait for the long one
// (which shows the test can tell the two apart). Steps are counted, not
// timed: a target of 1 ns makes every step's prompt budget the minimum
// chunk, whatever this machine's speed.
func TestFairScheduling(t *testing.T) {
	m := loadModel(t, "../../models/strata-kjv")
	run := func(target time.Duration) (decodeGaps, shortWait int) {
		e, err := New(m, Config{MaxBatchTokens: 64, Pages: 800, EOS: -1, NoPrefixCache: true, StepTarget: target})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		stream, _ := e.Submit(ctx, Request{Prompt: prompt(8, 1, m.VocabSize()), MaxTokens: 400})
		for range 3 { // the stream is decoding
			e.Step(ctx)
		}
		long, _ := e.Submit(ctx, Request{Prompt: prompt(600, 2, m.VocabSize()), MaxTokens: 2})
		e.Step(ctx)
		e.Step(ctx)
		short, _ := e.Submit(ctx, Request{Prompt: prompt(5, 3, m.VocabSize()), MaxTokens: 2})
		gotShort, gotLong := false, false
		for step := 0; !gotLong; step++ {
			before := len(pending(stream))
			e.Step(ctx)
			if len(pending(stream)) == before {
				decodeGaps++
			}
			if !gotShort && len(pending(short)) > 0 {
				gotShort, shortWait = true, step+1
			}
			gotLong = len(pending(long)) > 0
			if step > 2000 {
				t.Fatal("the long prompt never finished")
			}
		}
		if !gotShort {
			shortWait = -1
		}
		return decodeGaps, shortWait
	}
	gaps, wait := run(time.Nanosecond)
	if gaps != 0 {
		t.Errorf("fair: the running stream missed %d steps while the long prompt prefilled", gaps)
	}
	if wait < 1 || wait > 2 {
		t.Errorf("fair: the short prompt's first token came after %d steps", wait)
	}
	_, fifoWait := run(0)
	if fifoWait >= 1 && fifoWait <= 2 {
		t.Errorf("first come, first served gave the short prompt its token after %d steps: the test cannot tell", fifoWait)
	}
	t.Logf("fair: short prompt after %d steps, no stalls; FIFO: short prompt after %d steps (-1: after the long one)", wait, fifoWait)
}

// pending is the events a stream has queued (not yet read).
func pending(s *Stream) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue
}

// TestBatchedGoldenFair: under the latency schedule (decodes first, shared
// minimal prompt chunks) every path of two golden cases still matches the
// reference, with preemptions.
func TestBatchedGoldenFair(t *testing.T) {
	for _, name := range []string{"deepseek-v4/tiny", "deepseek-v4-extra/hc3-csa8"} {
		t.Run(name, func(t *testing.T) {
			m := loadModel(t, name)
			c, err := golden.Load(caseDir(name))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := CheckBatched(context.Background(), m, c, BatchedOptions{StepTarget: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Requests {
				if !r.OK() {
					t.Errorf("%s", r)
				}
			}
			if rep.Preemptions == 0 || rep.MaxBatchSeqs < 2 || rep.PagesLeft != 0 {
				t.Errorf("preemptions %d, most sequences in a step %d, pages left %d", rep.Preemptions, rep.MaxBatchSeqs, rep.PagesLeft)
			}
		})
	}
}
