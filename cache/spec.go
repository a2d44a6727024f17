// Package cache holds the per-request state of a model: one pool of
// fixed-size pages in the backend's memory, shared by every kind of cache;
// the kinds declared as data, each with a state policy; per-sequence page
// tables that map a kind's slots to pages; and, from the policies alone,
// what every architecture needs of its state: sharing prefixes by
// reference, snapshots, rollback of speculative feeds, and serialization.
package cache

import "fmt"

// DType is the storage format a cache kind is sized for. The CPU engine stores
// every kind as float32; the other formats exist so the capacity planner can
// size a deployment the way the released models store their caches.
type DType int

const (
	F32  DType = iota // 4 bytes a value
	BF16              // bfloat16, 2 bytes a value
	FP8               // 8-bit floats with scales; each architecture documents its layout (DeepSeek's: e4m3 non-RoPE part, bf16 RoPE part, scale bytes)
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

// Policy says how a kind's state changes as a sequence is fed, and so what
// sharing, snapshotting and rolling it back mean.
type Policy int

const (
	// Derived: Append when TokensPerSlot is set, Ring otherwise (for specs
	// that only size memory, such as the planner's presets).
	Derived Policy = iota
	// Append: one slot per TokensPerSlot tokens, written once when its
	// tokens are fed and never changed (compressed entries, indexer keys,
	// full-attention KV). Sequences share these pages by reference count:
	// a prefix hit, a snapshot or a fork copies nothing but a page about
	// to be written while shared.
	Append
	// Ring: FixedSlots slots, position p's state in slot p mod FixedSlots,
	// overwritten in place (window KV, compressor partial windows). A
	// snapshot copies the slots; a rollback restores the ones a feed
	// overwrote.
	Ring
	// Recurrent: FixedSlots slots holding one state, overwritten wholesale
	// by every token (linear-attention and conv state). A snapshot copies
	// it; a rollback restores it to before the feed, and the kept tokens
	// are fed again (recomputation: one state per sequence, no per-position
	// checkpoints).
	Recurrent
)

func (p Policy) String() string {
	switch p {
	case Append:
		return "append"
	case Ring:
		return "ring"
	case Recurrent:
		return "recurrent"
	}
	return "derived"
}

// Spec declares one kind of per-request cache state held by a set of
// layers. An append kind takes one slot per TokensPerSlot tokens of context;
// ring and recurrent kinds hold FixedSlots slots for the whole life of the
// request. Each layer of Layers holds its own instance.
type Spec struct {
	Name          string
	Layers        []int
	SlotBytes     int
	Policy        Policy
	TokensPerSlot int // append kinds; 0 otherwise
	FixedSlots    int // ring and recurrent kinds; 0 for append kinds
}

// Kind is the spec's policy, Derived resolved.
func (s Spec) Kind() Policy {
	if s.Policy != Derived {
		return s.Policy
	}
	if s.TokensPerSlot > 0 {
		return Append
	}
	return Ring
}

// Growing reports whether the kind grows with the context (Append).
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
	case (s.Kind() == Append) != (s.TokensPerSlot > 0):
		return fmt.Errorf("cache: spec %s: a %v kind with tokens-per-slot %d", s.Name, s.Kind(), s.TokensPerSlot)
	case s.Policy > Recurrent || s.Policy < Derived:
		return fmt.Errorf("cache: spec %s: unknown policy %d", s.Name, int(s.Policy))
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
