package deepseekv4

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
)

// TestYarnFrequencies checks the YaRN-corrected frequencies of the released
// compressed layers (64 RoPE dims, base 160000, factor 16 over 65536, beta
// 32/1) against the correction range worked out by hand: dim(32) = 15.45
// gives low 15, dim(1) = 24.71 gives high 25, so pairs 0..15 keep f_i,
// pairs 25.. get f_i/16, and pair 20 sits halfway.
func TestYarnFrequencies(t *testing.T) {
	inv := invFreqs(64, 160000, &Yarn{Factor: 16, OriginalMax: 65536, BetaFast: 32, BetaSlow: 1})
	if len(inv) != 32 {
		t.Fatalf("%d frequencies", len(inv))
	}
	for i, got := range inv {
		f := math.Pow(160000, -float64(2*i)/64)
		var want float64
		switch {
		case i <= 15:
			want = f
		case i >= 25:
			want = f / 16
		default:
			r := float64(i-15) / 10
			want = f/16*r + f*(1-r)
		}
		if math.Abs(float64(got)-want) > 2e-7*want {
			t.Errorf("pair %d: %g, want %g", i, got, want)
		}
	}
	if inv[0] != 1 {
		t.Errorf("pair 0: %g, want exactly 1", inv[0])
	}
	plain := invFreqs(64, 10000, nil)
	for i, got := range plain {
		if want := math.Pow(10000, -float64(2*i)/64); math.Abs(float64(got)-want) > 2e-7*want {
			t.Errorf("main pair %d: %g, want %g", i, got, want)
		}
	}
}

// stateSnapshot copies every compressed entry and indexer key a sequence holds.
func stateSnapshot(m *Model, seq *cache.Seq) map[[3]int][]float32 {
	out := map[[3]int][]float32{}
	for l, spec := range m.Cfg.Layers {
		for kind, ref := range map[int]slotRef{0: m.layout.layers[l].compressed, 1: m.layout.layers[l].indexer} {
			if ref.spec < 0 {
				continue
			}
			for e := range seq.Len() / spec.Rate {
				out[[3]int{l, kind, e}] = append([]float32(nil), cpu.F32(seq.Slot(ref.spec, ref.idx, e).As(compute.F32))...)
			}
		}
	}
	return out
}

// TestCompressionPaths feeds the same tokens whole, token by token, and in
// chunks whose boundaries fall inside compression windows (so CSA overlap
// halves and partial windows cross chunk boundaries), and compares every
// compressed entry and indexer key the caches hold.
func TestCompressionPaths(t *testing.T) {
	m, err := Load(goldenDir("tiny"), cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r := rand.New(rand.NewPCG(3, 4))
	ids := make([]int32, 70)
	for i := range ids {
		ids[i] = int32(r.IntN(m.Cfg.VocabSize))
	}
	run := func(feeds []int) map[[3]int][]float32 {
		pool, err := cache.PoolFor(m.Backend(), m.CacheSpecs(), len(ids), 1)
		if err != nil {
			t.Fatal(err)
		}
		seq, err := m.NewSeq(pool)
		if err != nil {
			t.Fatal(err)
		}
		pos := 0
		for _, n := range feeds {
			b := &model.Batch{Tokens: ids[pos : pos+n], Spans: []model.Span{{Seq: seq, Len: n}}}
			if _, err := m.Forward(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			pos += n
		}
		return stateSnapshot(m, seq)
	}
	ones := make([]int, len(ids))
	for i := range ones {
		ones[i] = 1
	}
	whole := run([]int{len(ids)})
	if len(whole) == 0 {
		t.Fatal("no compressed entries")
	}
	for name, feeds := range map[string][]int{"token by token": ones, "chunks 3,5,7": {3, 5, 7, 3, 5, 7, 3, 5, 7, 3, 5, 7, 6, 4}, "chunks 17,1,33,19": {17, 1, 33, 19}} {
		got := run(feeds)
		if len(got) != len(whole) {
			t.Fatalf("%s: %d entries, want %d", name, len(got), len(whole))
		}
		for k, want := range whole {
			if d := maxDiff(got[k], want); d > 1e-5 {
				t.Errorf("%s: layer %d kind %d entry %d differs by %g", name, k[0], k[1], k[2], d)
			}
		}
	}
}

func maxDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

func TestHasE4M3NaN(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want bool
	}{
		{[]byte{0x7E, 0xFE, 0x00, 0x80, 0x3F, 0x7E, 0x01, 0xFE, 0x7E}, false},
		{[]byte{0x7E, 0xFE, 0x00, 0x80, 0x3F, 0x7F, 0x01, 0xFE}, true},
		{[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xFF}, true},
		{[]byte{0xFF}, true},
		{nil, false},
	} {
		if got := hasE4M3NaN(tc.b); got != tc.want {
			t.Errorf("hasE4M3NaN(%x) = %v", tc.b, got)
		}
	}
	// Every byte value alone, at every position of a word.
	for v := range 256 {
		for pos := range 9 {
			b := make([]byte, 9)
			b[pos] = byte(v)
			if got, want := hasE4M3NaN(b), v&0x7F == 0x7F; got != want {
				t.Fatalf("byte %#x at %d: %v", v, pos, got)
			}
		}
	}
}
