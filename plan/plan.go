// Package plan is strata's capacity planner: the handbook's "KV ledger".
//
// A Model is the list of per-request cache kinds a model holds, as
// cache.Spec values: growing kinds (KV entries, compressed entries, indexer
// keys) take a slot every TokensPerSlot tokens, fixed kinds (sliding-window
// rings, compressor partial windows, linear-attention state) hold the same
// slots for the whole request. DeepSeek-V4 models are built from their
// config.json with the engine's own deepseekv4.Config.CacheSpecs, so the
// bytes and pages the planner predicts are the ones the engine takes; the
// other models of the handbook's ledger are built from its formulas.
//
// Two ways of counting appear and are kept apart:
//
//   - the handbook's formula, BytesPerToken()*L + FixedBytes(), continuous in
//     L; Ledger prints it, reproducing the handbook's table;
//   - the exact count, Bytes(L), with floor(L/TokensPerSlot) slots per
//     growing kind; Pages, Concurrency and the plot use it.
//
// The two agree whenever L is a multiple of every kind's TokensPerSlot (every
// power of two from 128 up for the handbook's models).
package plan

import (
	"fmt"
	"math"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// Model is one model's per-request cache, as the planner sizes it.
type Model struct {
	// Name identifies the model in output ("DeepSeek-V4-Flash").
	Name string
	// Description says what the model is and where its numbers come from.
	Description string
	// DTypes states the storage formats the Specs are sized for
	// ("fp8 kv 584 B, fp8 indexer key 132 B, f32 compressor state").
	DTypes string
	// Specs are the per-request cache kinds.
	Specs []cache.Spec
	// MaxContext is the longest context the model supports, in tokens.
	MaxContext int
	// V4 is the DeepSeek-V4 configuration the Specs were built from; nil for
	// other models. Attended needs it.
	V4 *deepseekv4.Config
}

// BytesPerToken is the growth of the request's cache per token of context,
// summed over the growing kinds. It is exact (a dyadic rational for every
// model here), not rounded.
func (m Model) BytesPerToken() float64 {
	var b float64
	for _, s := range m.Specs {
		b += s.BytesPerToken()
	}
	return b
}

// FixedBytes is the bytes every request holds regardless of its length:
// the sum of the fixed kinds.
func (m Model) FixedBytes() int64 {
	var b int64
	for _, s := range m.Specs {
		if !s.Growing() {
			b += s.Bytes(0)
		}
	}
	return b
}

// Bytes is the exact number of bytes a request with a context of n tokens
// holds: floor(n/TokensPerSlot) slots of each growing kind plus the fixed
// kinds, in every layer that has them. It does not check MaxContext.
func (m Model) Bytes(n int) int64 { return cache.TotalBytes(m.Specs, n) }

// LedgerBytes is the handbook's continuous estimate for a context of n
// tokens: BytesPerToken()*n + FixedBytes(), computed in float64 in the
// handbook's order of operations.
func (m Model) LedgerBytes(n int) float64 {
	// The conversion keeps the product from being fused with the sum, so the
	// result is bit-identical to the handbook's Python.
	return float64(m.BytesPerToken()*float64(n)) + float64(m.FixedBytes())
}

// Supports reports whether a context of n tokens is within MaxContext.
func (m Model) Supports(n int) bool { return n >= 0 && n <= m.MaxContext }

// Validate checks every spec against a page size (every slot must fit one
// page); pageBytes must be positive.
func (m Model) Validate(pageBytes int) error {
	if pageBytes <= 0 {
		return fmt.Errorf("plan: page size %d bytes is not positive", pageBytes)
	}
	if len(m.Specs) == 0 {
		return fmt.Errorf("plan: model %s has no cache kinds", m.Name)
	}
	for _, s := range m.Specs {
		if err := s.Validate(pageBytes); err != nil {
			return fmt.Errorf("plan: model %s: %w", m.Name, err)
		}
	}
	return nil
}

// Pages is the number of pool pages of pageBytes a request with a context of
// n tokens holds: cache.TotalPages over the model's specs, which is what the
// engine's cache.Seq holds after Reserve(n). Every layer's instance of every
// kind rounds up to whole pages. Call Validate first: a kind whose slot does
// not fit a page counts 0 pages.
func (m Model) Pages(n, pageBytes int) int { return cache.TotalPages(m.Specs, n, pageBytes) }

// Concurrency is how many requests of n tokens fit in budgetBytes, counting
// exact bytes (no page rounding). It is 0 when n exceeds MaxContext or n is
// negative, and math.MaxInt when a request holds no bytes at all.
func (m Model) Concurrency(n int, budgetBytes int64) int {
	if !m.Supports(n) || budgetBytes <= 0 {
		return 0
	}
	per := m.Bytes(n)
	if per == 0 {
		return math.MaxInt
	}
	return int(budgetBytes / per)
}

// ConcurrencyPages is how many requests of n tokens fit in budgetBytes when
// memory is a pool of whole pages of pageBytes (floor(budget/pageBytes)
// pages) and each request holds Pages(n, pageBytes) of them, as the engine's
// scheduler admits them. It is 0 when n exceeds MaxContext, n is negative or
// pageBytes is not positive, and math.MaxInt when a request holds no pages.
func (m Model) ConcurrencyPages(n int, budgetBytes int64, pageBytes int) int {
	if !m.Supports(n) || budgetBytes <= 0 || pageBytes <= 0 {
		return 0
	}
	per := m.Pages(n, pageBytes)
	if per == 0 {
		return math.MaxInt
	}
	return int(budgetBytes / int64(pageBytes) / int64(per))
}
