// Package cache holds the per-request state of a model: one pool of fixed-size
// pages shared by every kind of cache, the kinds themselves declared as data,
// and the per-sequence page tables that map a kind's slots to pool memory.
package cache

import "fmt"

// DType is the storage format a cache kind is sized for. The CPU engine stores
// every kind as float32; the other formats exist so the capacity planner can
// size a deployment the way the released models store their caches.
type DType int

const (
	F32 DType = iota
	BF16
	FP8 // DeepSeek's FP8 layout: e4m3 non-RoPE part, bf16 RoPE part, scale bytes
)

func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	case FP8:
		return "fp8"
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// ParseDType reads the names String returns.
func ParseDType(s string) (DType, error) {
	switch s {
	case "f32", "float32", "fp32":
		return F32, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "fp8", "f8", "e4m3":
		return FP8, nil
	}
	return 0, fmt.Errorf("cache: unknown dtype %q (want f32, bf16 or fp8)", s)
}

// Spec declares one kind of per-request cache state held by a set of layers.
// A growing kind takes one slot per TokensPerSlot tokens of context (KV
// entries, compressed entries, indexer keys); a fixed kind holds FixedSlots
// slots for the whole life of the request (a sliding-window ring, compressor
// partial windows, linear-attention state). Each layer of Layers holds its
// own instance.
type Spec struct {
	Name          string
	Layers        []int
	SlotBytes     int
	TokensPerSlot int // growing kinds; 0 for fixed kinds
	FixedSlots    int // fixed kinds; 0 for growing kinds
}

// Growing reports whether the kind grows with the context.
func (s Spec) Growing() bool { return s.TokensPerSlot > 0 }

// Slots is the number of slots one layer's instance holds for a context of n tokens.
func (s Spec) Slots(n int) int {
	if s.Growing() {
		return n / s.TokensPerSlot
	}
	return s.FixedSlots
}

// Bytes is the number of bytes all layers' instances hold for a context of n tokens.
func (s Spec) Bytes(n int) int64 {
	return int64(len(s.Layers)) * int64(s.Slots(n)) * int64(s.SlotBytes)
}

// BytesPerToken is the growth of Bytes per token of context (0 for fixed kinds).
func (s Spec) BytesPerToken() float64 {
	if !s.Growing() {
		return 0
	}
	return float64(len(s.Layers)) * float64(s.SlotBytes) / float64(s.TokensPerSlot)
}

// SlotsPerPage is how many slots of this kind one page of pageBytes holds.
func (s Spec) SlotsPerPage(pageBytes int) int { return pageBytes / s.SlotBytes }

// Pages is the number of pool pages all layers' instances hold for a context
// of n tokens: every instance rounds its slots up to whole pages.
func (s Spec) Pages(n, pageBytes int) int {
	per := s.SlotsPerPage(pageBytes)
	if per == 0 {
		return 0 // invalid; Validate reports it
	}
	return len(s.Layers) * ((s.Slots(n) + per - 1) / per)
}

// Validate checks the spec against a page size.
func (s Spec) Validate(pageBytes int) error {
	switch {
	case s.Name == "":
		return fmt.Errorf("cache: spec with no name")
	case s.SlotBytes <= 0:
		return fmt.Errorf("cache: spec %s: slot bytes %d", s.Name, s.SlotBytes)
	case (s.TokensPerSlot > 0) == (s.FixedSlots > 0):
		return fmt.Errorf("cache: spec %s: exactly one of tokens-per-slot (%d) and fixed slots (%d) must be set", s.Name, s.TokensPerSlot, s.FixedSlots)
	case pageBytes > 0 && s.SlotBytes > pageBytes:
		return fmt.Errorf("cache: spec %s: slot of %d bytes does not fit a page of %d bytes", s.Name, s.SlotBytes, pageBytes)
	}
	return nil
}

// TotalBytes sums Bytes over specs.
func TotalBytes(specs []Spec, n int) int64 {
	var b int64
	for _, s := range specs {
		b += s.Bytes(n)
	}
	return b
}

// TotalPages sums Pages over specs.
func TotalPages(specs []Spec, n, pageBytes int) int {
	p := 0
	for _, s := range specs {
		p += s.Pages(n, pageBytes)
	}
	return p
}
