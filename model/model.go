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
	Forward(ctx context.Context, b *Batch) ([]float32, error)
	// CacheSpecs are the cache kinds one sequence holds.
	CacheSpecs() []cache.Spec
	// NewSeq takes a new sequence's fixed pages from pool.
	NewSeq(pool *cache.Pool) (*cache.Seq, error)
	// Backend is where the model computes; its cache pools must live there.
	Backend() compute.Backend
	VocabSize() int
	Close() error
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
}

// Batch is one forward step: the tokens of several sequences, flattened.
type Batch struct {
	Tokens []int32
	Spans  []Span
	// WantHidden asks Forward to also return, in Hidden, the final hidden
	// state of every token of the batch (the input of the output head; for
	// DeepSeek-V4 the hc streams, hc·D values per token), which draft heads
	// such as MTP read.
	WantHidden bool
	Hidden     []float32
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
