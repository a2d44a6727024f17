package cpu

import (
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/quant"
)

// itemJob runs fn over items [0, n), which the workers claim in order; fn
// gets the claiming worker's index (for per-worker scratch) and the item.
type itemJob struct {
	n  int
	fn func(worker, i int)
}

func (j *itemJob) run(s *state, worker int) {
	for {
		i, ok := s.claim(j.n)
		if !ok {
			return
		}
		j.fn(worker, i)
	}
}

// forItems runs fn over n independent items on the backend's workers. Each
// item's arithmetic is its own, so the result does not depend on how the
// items were shared out.
func (s *state) forItems(n int, fn func(worker, i int)) {
	if n <= 0 {
		return
	}
	s.parallel(&itemJob{n: n, fn: fn}, n)
}

// perWorker is scratch made on first use by each worker of one call.
type perWorker[T any] struct {
	v    []*T
	make func() *T
}

func newPerWorker[T any](s *state, mk func() *T) *perWorker[T] {
	return &perWorker[T]{v: make([]*T, s.threads), make: mk}
}

func (p *perWorker[T]) get(worker int) *T {
	if p.v[worker] == nil {
		p.v[worker] = p.make()
	}
	return p.v[worker]
}

// slotRange reads values [lo, hi) of a slot of an f32 or bf16 paged kind:
// in place for f32, decoded into buf (which must hold hi-lo) for bf16.
func (p slots) slotRange(k, lo, hi int, buf []float32) []float32 {
	switch p.format {
	case compute.SlotF32:
		return p.slot(k)[lo:hi]
	case compute.SlotBF16:
		b := p.bytes(k)
		quant.DecodeBF16(buf[:hi-lo], b[2*lo:2*hi])
		return buf[:hi-lo]
	}
	panic("cpu: " + p.format.String() + " slots are not read by range")
}

// writeRange stores v as values [lo, lo+len(v)) of a slot of an f32 or bf16
// paged kind.
func (p slots) writeRange(k, lo int, v []float32) {
	switch p.format {
	case compute.SlotF32:
		copy(p.slot(k)[lo:lo+len(v)], v)
		return
	case compute.SlotBF16:
		b := p.bytes(k)
		quant.EncodeBF16(b[2*lo:2*(lo+len(v))], v)
		return
	}
	panic("cpu: " + p.format.String() + " slots are not written by range")
}
