package engine

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// scripted allows the tokens of one sequence in order, or, once past it,
// none: the output is exactly want, then EOS.
type scripted struct {
	want []int32
	at   int
}

func (c *scripted) Allowed(mask []uint64) {
	clear(mask)
	if c.at < len(c.want) {
		t := c.want[c.at]
		mask[t>>6] |= 1 << (t & 63)
	}
}

func (c *scripted) Accept(tok int32) error {
	if c.at >= len(c.want) || tok != c.want[c.at] {
		return errors.New("not allowed")
	}
	c.at++
	return nil
}

func (c *scripted) Complete() bool { return c.at == len(c.want) }

// setOf allows any token of a set, forever; complete from the start.
type setOf struct {
	set      []int32
	accepted []int32
	complete bool
}

func (c *setOf) Allowed(mask []uint64) {
	clear(mask)
	for _, t := range c.set {
		mask[t>>6] |= 1 << (t & 63)
	}
}

func (c *setOf) Accept(tok int32) error {
	if !slices.Contains(c.set, tok) {
		return errors.New("not in the set")
	}
	c.accepted = append(c.accepted, tok)
	return nil
}

func (c *setOf) Complete() bool { return c.complete }

// TestConstraint: a constraint decides every token, greedy and sampled,
// with speculation asked for by default; the request ends with EOS once
// the constraint is complete; tokens outside a set never come.
func TestConstraint(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	V := m.VocabSize()
	const eos = 1
	e, err := New(m, Config{MaxBatchTokens: 64, Pages: 2000, PageBytes: 512, EOS: eos,
		Speculation: Speculation{Method: SpecNgram, MaxDraft: 4, Fixed: true}})
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int32{5, 9, 5, 9, 5, 9, 5}
	want := []int32{9, 5, 9, 5, int32(V - 1), 2, 3} // the prompt's pattern invites n-gram drafts
	for _, temp := range []float64{0, 1} {
		c := &scripted{want: want}
		st, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 20, Constraint: c, IgnoreEOS: true,
			Sampling: Sampling{Temperature: temp, Seed: 7}})
		if err != nil {
			t.Fatal(err)
		}
		drain(t, e)
		toks, last := collect(t, st)
		if !slices.Equal(toks, append(slices.Clone(want), eos)) || last.Finish != FinishStop {
			t.Errorf("temperature %g: got %v (%s), want %v then EOS (stop)", temp, toks, last.Finish, want)
		}
	}
	if st := e.Stats(); st.SpecSteps != 0 {
		t.Errorf("constrained requests speculated: %d verification steps", st.SpecSteps)
	}

	// Sampled among a set over many tokens, never ending (not complete),
	// so the request runs to its length.
	set := []int32{3, 64, 65, int32(V - 2)}
	c := &setOf{set: set}
	st, err := e.Submit(context.Background(), Request{Prompt: prompt, MaxTokens: 40, Constraint: c, Sampling: Sampling{Temperature: 1.5, Seed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, e)
	toks, last := collect(t, st)
	if len(toks) != 40 || last.Finish != FinishLength {
		t.Fatalf("got %d tokens (%s), want 40 (length)", len(toks), last.Finish)
	}
	for _, tok := range toks {
		if !slices.Contains(set, tok) {
			t.Fatalf("token %d outside the allowed set %v", tok, set)
		}
	}
	if !slices.Equal(c.accepted, toks) {
		t.Errorf("the constraint accepted %v, the request produced %v", c.accepted, toks)
	}
	seen := map[int32]bool{}
	for _, tok := range toks {
		seen[tok] = true
	}
	if len(seen) < 2 {
		t.Errorf("sampling at temperature 1.5 among %v gave only %v", set, toks)
	}
}

// TestConstraintErrors: a constraint that allows nothing ends its request
// with an error; constraints cannot be combined with teacher forcing or
// hand-off.
func TestConstraintErrors(t *testing.T) {
	m := loadModel(t, "deepseek-v4/tiny")
	e, err := New(m, Config{MaxBatchTokens: 64, Pages: 2000, PageBytes: 512, EOS: -1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Submit(context.Background(), Request{Prompt: []int32{1, 2}, MaxTokens: 5, Constraint: &setOf{}})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, e)
	_, _, err = st.Collect(context.Background())
	if err == nil || !strings.Contains(err.Error(), "allows no token") {
		t.Errorf("an empty constraint: got %v, want an error saying it allows no token", err)
	}
	for _, r := range []Request{
		{Prompt: []int32{1}, MaxTokens: 2, Constraint: &setOf{}, Forced: []int32{3}},
		{Prompt: []int32{1}, MaxTokens: 2, Constraint: &setOf{}, Handoff: true},
	} {
		if _, err := e.Submit(context.Background(), r); err == nil {
			t.Errorf("request %+v accepted", r)
		}
	}
}

// TestApplyMask: exactly the left-out logits become -Inf, sparse and dense
// masks alike, a row not a multiple of 64 long included.
func TestApplyMask(t *testing.T) {
	for _, every := range []int{1, 2, 3, 50, 1000} {
		const V = 1000
		x := make([]float32, V)
		mask := make([]uint64, (V+63)/64)
		for i := range x {
			x[i] = float32(i)
			if i%every == 0 {
				mask[i>>6] |= 1 << (i & 63)
			}
		}
		applyMask(x, mask)
		for i, v := range x {
			if want := float32(i); i%every != 0 {
				want = float32(math.Inf(-1))
				if v != want {
					t.Fatalf("every %d: logit %d is %g, want -Inf", every, i, v)
				}
			} else if v != want {
				t.Fatalf("every %d: allowed logit %d is %g, want %g", every, i, v, want)
			}
		}
	}
}
