package deepseekv4

import (
	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
)

// passBufs are the host-side buffers of one kind of pass (the main
// model's Forward, the MTP layer's), reused pass to pass so that a decode
// step allocates nothing: the step's metadata and its host copy, the
// hidden-ring tables and the logits.
type passBufs struct {
	seqs  []*cache.Seq
	rows  []int32
	tabs  [][]pageTab
	meta  hostInts
	st    step
	ring  hostInts // ringOf's table
	drfts []*cache.Seq
	rtab  []int32

	logits []float32
	// hostMem says logits is the backend's host memory (never shrunk).
	hostMem bool
	// boxed is logits[:boxedN] as an any, made again only when the
	// length changes (Read takes an any, and boxing a slice allocates).
	boxed  any
	boxedN int
}

// pageTab is where one kind's page table sits in the host buffer.
type pageTab struct{ off, stride int }

// hostInts is a host buffer of int32s written to the backend in one
// Write, boxed once per growth of the buffer (Write takes an any).
type hostInts struct {
	v     []int32
	boxed any // v[:cap(v)]
}

// start returns the buffer emptied, for appending.
func (h *hostInts) start() []int32 { return h.v[:0] }

// upload takes the appended buffer v back and writes it to a new scratch
// tensor of cap(v) elements (the first len(v) are v), which it returns.
// A buffer much larger than what the pass needs (after a long prefill) is
// shrunk, once.
func (h *hostInts) upload(be compute.Backend, v []int32) compute.Tensor {
	if cap(v) > 2*len(v)+4096 {
		v = append(make([]int32, 0, len(v)+len(v)/4+64), v...)
	}
	if h.boxed == nil || cap(v) != cap(h.v) || (cap(v) > 0 && &v[:1][0] != &h.v[:1][0]) {
		h.boxed = v[:cap(v)]
	}
	h.v = v
	t := be.Scratch(compute.I32, 1, max(1, cap(v)))
	if cap(v) > 0 {
		be.Write(t, h.boxed)
	}
	return t
}

// readLogits reads the R×V logits out of the backend into the pass's
// logits buffer and returns them; they stay valid until the pass runs
// again.
func (p *passBufs) readLogits(be compute.Backend, out compute.Tensor) ([]float32, error) {
	n := out.Len()
	if cap(p.logits) < n || (!p.hostMem && cap(p.logits) > 4*n && cap(p.logits) > 1<<20) {
		p.logits, p.hostMem = hostFloats(be, p.logits, n)
		p.boxed = nil
	}
	lg := p.logits[:n]
	if p.boxed == nil || p.boxedN != n {
		p.boxed, p.boxedN = lg, n
	}
	if err := be.Read(p.boxed, out); err != nil {
		return nil, err
	}
	return lg, nil
}

// hostFloats returns a logits buffer of at least n floats in place of
// old: the backend's own host memory where it has it (compute.HostMemory:
// reads into it are direct), else Go memory. The backend's memory lives
// until the backend closes (a caller may still hold rows of old), so it
// grows by doubling, never shrinks, and is not used past maxHostLogits.
func hostFloats(be compute.Backend, old []float32, n int) (v []float32, backend bool) {
	if hm, ok := be.(compute.HostMemory); ok && n <= maxHostLogits {
		if v := hm.HostFloats(min(max(n, 2*cap(old)), maxHostLogits)); v != nil {
			return v, true
		}
	}
	return make([]float32, n), false
}

// maxHostLogits bounds the logits buffers taken from the backend's host
// memory (256 MB: a decode step of 512 rows at the Flash vocabulary);
// longer reads (prefill with every row's logits) go to Go memory.
const maxHostLogits = 1 << 26

// opArgs are the argument structs of the ops that take them by pointer,
// reused call to call (a pointer passed through the Backend interface
// escapes, so a literal would be allocated at every call). Forward and
// Draft never run concurrently, so one set serves both.
type opArgs struct {
	attn compute.AttentionArgs
	idx  compute.IndexerArgs
	comp compute.CompressArgs
	mm   products
}
