// Package model defines what every architecture provides to the engine: a
// forward pass over a ragged batch of sequences whose state lives in cache
// pages, and the cache kinds a sequence holds.
package model

import (
	"context"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// Model is a loaded checkpoint. Forward must not be called concurrently.
type Model interface {
	// Forward runs one step over b and returns LogitRows(b) rows of
	// VocabSize logits, in span order, advancing each span's sequence.
	// The logits may be a buffer of the model's, valid only until its next
	// Forward or Draft (Drafter.Draft's logits likewise): a caller that
	// keeps them longer copies them.
	Forward(ctx context.Context, b *Batch) ([]float32, error)
	// CacheSpecs are the cache kinds one sequence holds.
	CacheSpecs() []cache.Spec
	// NewSeq takes a new sequence's fixed pages from pool.
	NewSeq(pool *cache.Pool) (*cache.Seq, error)
	// Backend is where the model computes; its cache pools must live there.
	Backend() compute.Backend
	// Info describes the model to its callers.
	Info() Info
	VocabSize() int
	Close() error
}

// Info is what callers need to know of a loaded model beyond its cache.
type Info struct {
	Arch       string // the registry's name for the architecture
	Layers     int
	Hidden     int
	BOS, EOS   int32 // negative: none
	MaxContext int   // the most positions a sequence may reach
}

// Logits says which positions of a span need logits.
type Logits int

const (
	NoLogits   Logits = iota // none (a prefill chunk that is not the last)
	LastLogits               // the span's last position
	AllLogits                // every position
)

// Span is one sequence's part of a batch: Len consecutive tokens of Batch.Tokens
// starting at Start, continuing the sequence at position Seq.Len().
type Span struct {
	Seq        *cache.Seq
	Start, Len int
	Logits     Logits
	// Draft, when set, is the sequence's draft state (Drafter.DraftSpecs):
	// Forward also records there what the draft head will read of these
	// positions.
	Draft *cache.Seq
}

// Batch is one forward step: the tokens of several sequences, flattened.
type Batch struct {
	Tokens []int32
	Spans  []Span
}

// LogitRows is the number of logit rows a forward over b returns.
func (b *Batch) LogitRows() int {
	n := 0
	for _, s := range b.Spans {
		switch s.Logits {
		case LastLogits:
			n++
		case AllLogits:
			n += s.Len
		}
	}
	return n
}

// Drafter is a model with a draft head that proposes tokens for
// speculative decoding from the model's own hidden state (DeepSeek-V4's
// MTP layer). The hidden state stays in the draft state: the caller only
// passes tokens.
type Drafter interface {
	// DraftSpecs are the cache kinds of one sequence's draft state: the
	// draft head's own cache and the hidden states it reads.
	DraftSpecs() []cache.Spec
	// DraftWindow is how many positions up to the one drafted from the
	// head reads: the catch-up after a gap needs only that many.
	DraftWindow() int
	// Draft runs the draft head over b, whose spans' Seq are draft states:
	// for position t of a span the batch token is the token at t+1, and
	// the head reads the hidden state of t that Forward (with Span.Draft)
	// or the previous Draft recorded. It returns the logits for the token
	// at t+2 of the rows the spans ask for, records its own hidden state as
	// that of the position after each span's last (for drafting further),
	// and advances each draft state.
	Draft(ctx context.Context, b *Batch) ([]float32, error)
}

// PrefixAligner is a model whose sequence state can be restored from a
// snapshot only at multiples of PrefixAlign tokens (for DeepSeek-V4 the
// least common multiple of its compression rates, where every compressor's
// partial window is empty; for recurrent models their checkpoint interval).
type PrefixAligner interface {
	PrefixAlign() int
}

// Fingerprinter identifies a model's weights; handed-off states resume
// only on a model with the same fingerprint.
type Fingerprinter interface {
	Fingerprint() string
}

// Prefaulter is a model whose weights can be read into memory ahead of
// use (a memory-mapped checkpoint), so that the first requests do not pay
// for page faults.
type Prefaulter interface {
	Prefault(ctx context.Context) error
}

// DecodeReader is a model that can say how many bytes one decode step at
// a context of n tokens reads: weights and cache. It is the numerator of
// the decode speed floor benchmarks print.
type DecodeReader interface {
	DecodeReadBytes(n int) (weights, cache int64)
}

// PrefillCounter is a model that can say how much arithmetic prefilling n
// tokens takes: the numerator of the prefill speed floor.
type PrefillCounter interface {
	PrefillFLOPs(n int) float64
}
