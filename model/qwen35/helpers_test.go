package qwen35

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model"
)

// goldenCases are the shared Qwen3.5 reference cases (transformers 5.17,
// float64 on CPU): dense and MoE.
var goldenCases = []string{"qwen3.5/tiny", "qwen3.5-moe/tiny"}

func loadCase(t *testing.T, name string) (*Model, *golden.Case) {
	return loadCaseWith(t, name, Options{})
}

func loadCaseWith(t *testing.T, name string, o Options) (*Model, *golden.Case) {
	t.Helper()
	dir := caseDir(name)
	m, err := LoadWith(dir, cpu.New(0), o)
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
	return m, c
}

// testPool is a pool for n sequences of up to tokens tokens of m's kinds
// (and its draft kinds), with small pages so that kinds span several.
func testPool(t *testing.T, m *Model, tokens, n int) *cache.Pool {
	t.Helper()
	specs := append(append([]cache.Spec(nil), m.CacheSpecs()...), m.DraftSpecs()...)
	pb := 0
	for _, s := range specs {
		pb = max(pb, s.SlotBytes)
	}
	p, err := cache.NewPool(m.Backend(), pb, n*cache.TotalPages(specs, tokens, pb)+4)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newSeq(t *testing.T, m *Model, pool *cache.Pool) *cache.Seq {
	t.Helper()
	s, err := m.NewSeq(pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Release)
	return s
}

// feedSeq feeds ids into s in steps of the given sizes, returning the
// logits of every position.
func feedSeq(t *testing.T, m *Model, s *cache.Seq, ids []int32, feeds []int) []float32 {
	t.Helper()
	var out []float32
	pos := 0
	for _, n := range feeds {
		lg, err := m.Forward(context.Background(), &model.Batch{Tokens: ids[pos : pos+n], Spans: []model.Span{{Seq: s, Len: n, Logits: model.AllLogits}}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg...)
		pos += n
	}
	return out
}

// feed runs ids through a fresh sequence in steps of the given sizes and
// returns the logits of every position and the sequence's state.
func feed(t *testing.T, m *Model, ids []int32, feeds []int) ([]float32, seqState) {
	t.Helper()
	pool := testPool(t, m, len(ids), 1)
	s := newSeq(t, m, pool)
	lg := feedSeq(t, m, s, ids, feeds)
	return lg, stateOf(t, s)
}

// seqState is a sequence's cache state read back: for each kind name and
// layer, the values of every slot holding state (f32 kinds).
type seqState struct {
	n     int
	kinds map[string][][]float32 // [layer index in the spec] values
}

func stateOf(t *testing.T, s *cache.Seq) seqState {
	t.Helper()
	st := seqState{n: s.Len(), kinds: map[string][][]float32{}}
	be := s.Pool().Backend()
	for i, sp := range s.Specs() {
		live := sp.FixedSlots
		if sp.Kind() == cache.Append {
			live = sp.Slots(s.Len())
		}
		for j := range sp.Layers {
			var vals []float32
			buf := make([]byte, sp.SlotBytes)
			for k := range live {
				if err := be.Read(buf, s.Slot(i, j, k)); err != nil {
					t.Fatal(err)
				}
				for o := 0; o+4 <= len(buf); o += 4 {
					vals = append(vals, math.Float32frombits(binary.LittleEndian.Uint32(buf[o:])))
				}
			}
			st.kinds[sp.Name] = append(st.kinds[sp.Name], vals)
		}
	}
	return st
}

// diff is the largest difference of each kind's values relative to the
// largest value of a's (1 where shapes differ).
func (a seqState) diff(b seqState) map[string]float64 {
	out := map[string]float64{}
	for k, la := range a.kinds {
		lb := b.kinds[k]
		for j := range la {
			if j >= len(lb) || len(la[j]) != len(lb[j]) {
				out[k] = 1
				continue
			}
			out[k] = max(out[k], maxAbsDiff(la[j], lb[j])/max(maxAbs(la[j]), 1e-30))
		}
	}
	return out
}

// same reports whether two states are the same bits.
func (a seqState) same(b seqState) bool {
	if a.n != b.n || len(a.kinds) != len(b.kinds) {
		return false
	}
	for k, la := range a.kinds {
		lb, ok := b.kinds[k]
		if !ok || len(la) != len(lb) {
			return false
		}
		for j := range la {
			if len(la[j]) != len(lb[j]) {
				return false
			}
			for i := range la[j] {
				if math.Float32bits(la[j][i]) != math.Float32bits(lb[j][i]) {
					return false
				}
			}
		}
	}
	return true
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d != d {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func maxAbs(a []float32) float64 {
	m := 0.0
	for _, x := range a {
		m = max(m, math.Abs(float64(x)))
	}
	return m
}
