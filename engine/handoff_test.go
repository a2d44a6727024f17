package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// written is the state a FinishHandoff event carries, written out.
func written(t testing.TB, last Event) []byte {
	t.Helper()
	if last.Handoff == nil {
		t.Fatalf("event %+v carries no hand-off", last)
	}
	var b bytes.Buffer
	n, err := last.Handoff.WriteTo(&b)
	if err != nil || n != last.Handoff.Size() || int64(b.Len()) != n {
		t.Fatalf("writing the state: %d of %d bytes, %v", n, last.Handoff.Size(), err)
	}
	return b.Bytes()
}

// TestHandoffReleased: a hand-off's pages stay in the pool until its state
// is written or given up, whether by Close or by a reader that discards
// its stream before reading the event.
func TestHandoffReleased(t *testing.T) {
	m := loadModel(t, "../../models/strata-kjv")
	e, _ := New(m, Config{Pages: 300, EOS: -1, NoPrefixCache: true})
	r := Request{Prompt: prompt(40, 2, m.VocabSize()), MaxTokens: 5, Handoff: true}
	s1, _ := e.Submit(context.Background(), r)
	s2, _ := e.Submit(context.Background(), r)
	drain(t, e)
	if e.Pool().FreePages() == e.Pool().NumPages() {
		t.Fatal("the hand-offs hold no pages before they are written")
	}
	_, last, _ := s1.Collect(context.Background())
	last.Handoff.Close()
	last.Handoff.Close() // idempotent
	if _, err := last.Handoff.WriteTo(io.Discard); err == nil {
		t.Fatal("a closed hand-off was written")
	}
	s2.Discard()
	if e.Pool().FreePages() != e.Pool().NumPages() {
		t.Fatalf("%d of %d pages free after closing and discarding", e.Pool().FreePages(), e.Pool().NumPages())
	}
}

// TestHandoff: a request prefilled by one engine and continued by another
// (each with its own copy of the model, as two processes would have) gives
// exactly the tokens one engine gives, greedy and seeded sampling alike.
func TestHandoff(t *testing.T) {
	mA := loadModel(t, "../../models/strata-kjv")
	mB := loadModel(t, "../../models/strata-kjv")
	p := prompt(70, 4, mA.VocabSize())
	for _, sp := range []Sampling{{}, {Temperature: 0.9, TopP: 0.9, RepetitionPenalty: 1.2, FrequencyPenalty: 0.3, Seed: 77}} {
		r := Request{Prompt: p, MaxTokens: 40, Sampling: sp}
		one, _ := New(mA, Config{Pages: 300, EOS: -1})
		s, _ := one.Submit(context.Background(), r)
		drain(t, one)
		want, _ := collect(t, s)

		a, _ := New(mA, Config{Pages: 300, EOS: -1})
		b, _ := New(mB, Config{Pages: 300, EOS: -1})
		r.Handoff = true
		sa, _ := a.Submit(context.Background(), r)
		drain(t, a)
		first, last, err := sa.Collect(context.Background())
		if err != nil || last.Finish != FinishHandoff || len(first) != 1 {
			t.Fatalf("prefill side: %v tokens, finish %q, err %v", first, last.Finish, err)
		}
		state := written(t, last)
		if a.Pool().FreePages()+a.Stats().PrefixPages != a.Pool().NumPages() {
			t.Fatal("the prefill engine kept the handed-off request's pages")
		}
		// The state is read as it arrives, a byte at a time here.
		sb, err := b.Resume(context.Background(), iotest.OneByteReader(bytes.NewReader(state)))
		if err != nil {
			t.Fatal(err)
		}
		drain(t, b)
		rest, _ := collect(t, sb)
		if got := append(first, rest...); !slices.Equal(got, want) {
			t.Fatalf("sampling %+v: handed off %v, one engine %v", sp, got, want)
		}
	}
}

func TestHandoffRejects(t *testing.T) {
	m := loadModel(t, "../../models/strata-kjv")
	tiny := loadModel(t, "deepseek-v4/tiny")
	a, _ := New(m, Config{Pages: 300, EOS: -1})
	s, _ := a.Submit(context.Background(), Request{Prompt: prompt(20, 1, m.VocabSize()), MaxTokens: 5, Handoff: true})
	drain(t, a)
	_, last, _ := s.Collect(context.Background())
	state := written(t, last)
	resealed := func(b []byte) []byte { // fix the checksum after an edit
		b = slices.Clone(b)
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
		return b
	}
	flip := slices.Clone(state)
	flip[len(flip)/2] ^= 1
	version := slices.Clone(state)
	binary.LittleEndian.PutUint32(version[8:], 3)
	b, _ := New(m, Config{Pages: 300, EOS: -1})
	other, _ := New(tiny, Config{Pages: 300, PageBytes: 4096, EOS: -1})
	for _, tc := range []struct {
		name  string
		e     *Engine
		state []byte
		want  string
	}{
		{"corrupt", b, flip, "checksum"},
		{"truncated", b, state[:len(state)-100], "truncated"},
		{"no checksum", b, state[:len(state)-2], "truncated before its checksum"},
		{"trailing bytes", b, append(slices.Clone(state), 0), "after the checksum"},
		{"version", b, resealed(version), "format version 3"},
		{"other model", other, state, "made by model"},
		{"not a state", b, []byte("hello, this is not a state at all"), "not a strata handoff"},
	} {
		_, err := tc.e.Resume(context.Background(), bytes.NewReader(tc.state))
		if !errors.Is(err, ErrHandoff) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if b.Pool().FreePages() != b.Pool().NumPages() {
		t.Fatal("a rejected state kept pages")
	}
}

func FuzzResume(f *testing.F) {
	m, err := loadFuzzModel()
	if err != nil {
		f.Fatal(err)
	}
	a, _ := New(m, Config{Pages: 300, EOS: -1})
	s, _ := a.Submit(context.Background(), Request{Prompt: []int32{0, 5, 9}, MaxTokens: 4, Handoff: true})
	for !a.Idle() {
		a.Step(context.Background())
	}
	_, last, _ := s.Collect(context.Background())
	f.Add(written(f, last))
	f.Add([]byte(handoffMagic))
	b, _ := New(m, Config{Pages: 300, EOS: -1})
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := b.Resume(context.Background(), bytes.NewReader(data))
		if err != nil {
			if b.Pool().FreePages() != b.Pool().NumPages() {
				t.Fatal("a rejected state kept pages")
			}
			return
		}
		b.cancelAll(context.Canceled)
		st.Collect(context.Background())
	})
}
