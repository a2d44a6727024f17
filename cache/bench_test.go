package cache

import (
	"testing"

	"github.com/strata-inference/strata/compute/cpu"
)

// kjvSpecs are the shipped model's cache kinds (models/strata-kjv: head_dim
// 128, indexer keys of 64, window 128, layers [0, 0, 4, 128, 4, 128]), in
// float32.
var kjvSpecs = []Spec{
	{Name: "window", Layers: []int{0, 1, 2, 3, 4, 5}, SlotBytes: 512, Policy: Ring, FixedSlots: 128},
	{Name: "compressed", Layers: []int{2, 4}, SlotBytes: 512, Policy: Append, TokensPerSlot: 4},
	{Name: "compressor", Layers: []int{2, 4}, SlotBytes: 2048, Policy: Ring, FixedSlots: 8},
	{Name: "indexer", Layers: []int{2, 4}, SlotBytes: 256, Policy: Append, TokensPerSlot: 4},
	{Name: "indexer-compressor", Layers: []int{2, 4}, SlotBytes: 1024, Policy: Ring, FixedSlots: 8},
	{Name: "compressed", Layers: []int{3, 5}, SlotBytes: 512, Policy: Append, TokensPerSlot: 128},
	{Name: "compressor", Layers: []int{3, 5}, SlotBytes: 1024, Policy: Ring, FixedSlots: 128},
}

// BenchmarkSnapshot16K is a prefix snapshot (or hit) of a 16K-token
// sequence: a fork that shares the append pages and copies the ring state.
// Before state policies, a snapshot copied every live slot
// (TotalBytes(kjvSpecs, 16384) = the "state-bytes" metric).
func BenchmarkSnapshot16K(b *testing.B) {
	const n = 16384
	p, err := NewPool(cpu.New(1), DefaultPageBytes, 2*TotalPages(kjvSpecs, n, DefaultPageBytes)+64)
	if err != nil {
		b.Fatal(err)
	}
	live, _ := NewSeq(p, kjvSpecs)
	if err := live.Reserve(n); err != nil {
		b.Fatal(err)
	}
	live.Advance(n)
	c0 := p.CopiedBytes()
	b.ResetTimer()
	for range b.N {
		f, err := live.Fork()
		if err != nil {
			b.Fatal(err)
		}
		f.Release()
	}
	b.StopTimer()
	b.ReportMetric(float64(p.CopiedBytes()-c0)/float64(b.N), "copied-B/op")
	b.ReportMetric(float64(TotalBytes(kjvSpecs, n)), "state-bytes")
}
