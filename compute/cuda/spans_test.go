package cuda

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
)

// TestBackendRingSpans checks the kernels' span search (span_of: the
// spans' table read 16 rows at a time) where a batch has more spans than
// one round of it: store_ring and load_ring over 37 spans of 1 to 4 rows,
// with rows in no span between them, give the CPU backend's pool bytes
// and rows bit for bit (and leave the rows in no span alone).
func TestBackendRingSpans(t *testing.T) {
	be := newBackend(t, Strict)
	ref := cpu.New(2)
	rng := rand.New(rand.NewPCG(3, 31))
	const cols, size, perPage = 24, 4, 2
	var tab, pos []int32
	var gaps []int // the rows in no span
	T := 0
	for s := range 37 {
		if s%9 == 4 {
			gaps = append(gaps, T)
			pos = append(pos, 0)
			T++
		}
		n := 1 + rng.IntN(4)
		if s%3 != 0 {
			n = 1
		}
		p0 := 1 + rng.IntN(40)
		tab = append(tab, int32(T), int32(n), int32(p0))
		for i := range n {
			pos = append(pos, int32(p0+i))
		}
		T += n
	}
	gaps = append(gaps, T) // and the last row
	pos = append(pos, 0)
	T++
	nspans := len(tab) / 3
	src := make([]float32, T*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	pagesPer := size / perPage
	pages := make([]int32, nspans*pagesPer)
	for i := range pages {
		pages[i] = int32(len(pages) - 1 - i) // span s's pages from the pool's end
	}
	sentinel := make([]float32, T*cols)
	for i := range sentinel {
		sentinel[i] = float32(i)
	}
	run := func(b compute.Backend) ([]byte, []float32) {
		mark := b.ScratchMark()
		defer b.ResetScratch(mark)
		up := func(dt compute.DType, v any, rows, c int) compute.Tensor {
			x := b.Scratch(dt, rows, c)
			b.Write(x, v)
			return x
		}
		slot := 4 * cols
		pool := up(compute.U8, make([]byte, len(pages)*perPage*slot), len(pages), perPage*slot)
		ring := compute.Paged{Pool: pool, Pages: up(compute.I32, pages, nspans, pagesPer), PerPage: perPage, SlotBytes: slot,
			Format: compute.SlotF32, Width: cols}
		sp := compute.Spans{Tab: up(compute.I32, tab, nspans, 3), Pos: up(compute.I32, pos, T, 1)}
		b.StoreRing(ring, size, up(compute.F32, src, T, cols), sp)
		dst := up(compute.F32, sentinel, T, cols)
		b.LoadRing(dst, ring, size, sp)
		gotPool := make([]byte, len(pages)*perPage*slot)
		gotRows := make([]float32, T*cols)
		if err := b.Read(gotPool, pool); err != nil {
			t.Fatal(err)
		}
		if err := b.Read(gotRows, dst); err != nil {
			t.Fatal(err)
		}
		return gotPool, gotRows
	}
	wantPool, wantRows := run(ref)
	gotPool, gotRows := run(be)
	if !slices.Equal(gotPool, wantPool) {
		t.Errorf("%d spans: the ring's bytes differ from the CPU's", nspans)
	}
	for i := range gotRows {
		if math.Float32bits(gotRows[i]) != math.Float32bits(wantRows[i]) {
			t.Fatalf("%d spans: row %d column %d = %v, CPU %v", nspans, i/cols, i%cols, gotRows[i], wantRows[i])
		}
	}
	// Rows in no span keep the sentinel; the others were loaded.
	for r := range T {
		kept := slices.Equal(gotRows[r*cols:(r+1)*cols], sentinel[r*cols:(r+1)*cols])
		if gap := slices.Contains(gaps, r); kept != gap {
			t.Errorf("row %d (in no span: %v) kept the sentinel: %v", r, gap, kept)
		}
	}
}
