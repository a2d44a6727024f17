package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// The helpers of a Backend are persistent goroutines. Waking a parked
// goroutine can take a hundred microseconds or more on a virtual machine,
// as long as a whole decode matmul, so a helper that has finished a job
// spins for spinFor, yielding its processor at every turn (so that it costs
// other goroutines little), before it parks.
// A forward pass issues its kernels back to back, so helpers are usually
// spinning when the next job comes.
//
// Jobs are split into items that workers claim (state.claim); the caller
// runs the job too, as worker 0, and waits only for the helpers that joined
// the job before the caller finished its share. A helper that comes late
// finds the job closed and goes back to waiting, so a helper descheduled
// before it joins never delays a call.

// spinFor is how long an idle helper spins before parking.
const spinFor = time.Millisecond

// pool is the helper goroutines of a state and the protocol to hand them jobs.
type pool struct {
	helpers []helper     // helpers[i] is worker i; helpers[0] is unused (the caller)
	job     job          // the job in progress; read by helpers only after joining it
	gen     atomic.Int64 // incremented for every job handed to helpers, and by stop
	ticket  atomic.Int64 // helpers that joined the job, and closed once the caller is done
	done    atomic.Int64 // helpers that finished the job
	maxJoin atomic.Int64 // how many helpers may join the job
	stopped atomic.Bool
}

const closed = 1 << 40 // ticket flag: the job takes no more helpers

type helper struct {
	parked atomic.Bool   // set while the helper is parked, or about to park, on wake
	wake   chan struct{} // buffered; a token or its closing unparks the helper
}

// parallel runs j on up to workers workers (at most s.threads), the calling
// goroutine being worker 0, and returns when it is done.
func (s *state) parallel(j job, workers int) {
	workers = min(workers, s.threads)
	s.next.Store(0)
	if workers <= 1 {
		j.run(s, 0)
		return
	}
	p := &s.pool
	if p.helpers == nil {
		p.helpers = make([]helper, s.threads)
		for i := 1; i < s.threads; i++ {
			p.helpers[i].wake = make(chan struct{}, 1)
			go s.helper(i)
		}
	}
	p.job = j
	p.maxJoin.Store(int64(workers - 1))
	p.done.Store(0)
	p.ticket.Store(0) // open
	p.gen.Add(1)
	for i := 1; i < s.threads; i++ {
		if h := &p.helpers[i]; h.parked.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
		}
	}
	j.run(s, 0)
	joined := p.ticket.Or(closed)
	for p.done.Load() != joined {
		runtime.Gosched()
	}
	p.job = nil
}

// join reports whether a helper may run the current job, counting it in.
func (p *pool) join() bool {
	for {
		t := p.ticket.Load()
		if t&closed != 0 || t >= p.maxJoin.Load() {
			return false
		}
		if p.ticket.CompareAndSwap(t, t+1) {
			return true
		}
	}
}

// helper is the loop of helper goroutine i.
func (s *state) helper(i int) {
	p := &s.pool
	h := &p.helpers[i]
	seen := p.gen.Load()
	for {
		if !p.await(h, seen) {
			return
		}
		seen = p.gen.Load()
		if p.join() {
			p.job.run(s, i)
			p.done.Add(1)
		}
	}
}

// await returns when p.gen differs from seen, spinning a while and then
// parking, and false if the pool is stopped.
func (p *pool) await(h *helper, seen int64) bool {
	deadline := time.Now().Add(spinFor)
	for p.gen.Load() == seen {
		runtime.Gosched()
		if time.Now().After(deadline) {
			h.parked.Store(true)
			if p.gen.Load() != seen && h.parked.CompareAndSwap(true, false) {
				break // a job came before anyone saw us parked
			}
			// Unparked by a token, or by the closing of wake.
			<-h.wake
			break
		}
	}
	return !p.stopped.Load()
}

// stop ends the helper goroutines. It runs once the Backend is unreachable,
// so never during a call.
func (s *state) stop() {
	p := &s.pool
	p.stopped.Store(true)
	p.gen.Add(1)
	for i := 1; i < len(p.helpers); i++ {
		close(p.helpers[i].wake)
	}
}

// rangeJob runs fn over [0, n) in contiguous chunks of chunk indices,
// claimed by the workers (state.parallelFor).
type rangeJob struct {
	n, chunk int
	fn       func(lo, hi int)
}

func (j *rangeJob) run(s *state, _ int) {
	items := (j.n + j.chunk - 1) / j.chunk
	for {
		it, ok := s.claim(items)
		if !ok {
			return
		}
		lo := it * j.chunk
		j.fn(lo, min(lo+j.chunk, j.n))
	}
}

// parallelFor runs fn over [0, n) on the pool, split into contiguous
// chunks (up to four per worker, so that a worker that comes late finds
// some left): for ops whose indices are independent of one another, so
// that no split changes their bits. fn must not use the pool itself (no
// MatMul or other parallel op inside), and calls do not nest.
func (s *state) parallelFor(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	w := min(s.threads, n)
	if w <= 1 {
		fn(0, n)
		return
	}
	j := &s.rng
	*j = rangeJob{n: n, chunk: (n + 4*w - 1) / (4 * w), fn: fn}
	s.parallel(j, w)
	*j = rangeJob{}
}
