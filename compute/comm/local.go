package comm

import (
	"fmt"
	"sync"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
)

// Local is one rank's end of an in-process communicator: the ranks are
// goroutines of one process, each with its own backend, and a collective
// is a rendezvous where every rank posts what it sends, then copies what
// it receives out of the others' posts. On CPU backends the copies go from
// one rank's tensors straight into another's (one memory copy per byte
// moved); on any other backend each side goes through host memory with
// the backend's Read and Write.
//
// The ranks must call the same collectives in the same order, as with
// NCCL; unlike NCCL, Local checks it: a collective the ranks call
// inconsistently fails on every rank with ErrMismatch instead of hanging.
// Reductions add in rank order, so every rank gets the same bits.
type Local struct {
	g    *group
	rank int
	be   compute.Backend
	// host: be is the CPU backend, whose tensors are read in place.
	host bool
	// calls counts this end's collectives, to check the ranks agree.
	calls uint64
}

var _ Comm = (*Local)(nil)

// group is what the ends of one Local communicator share.
type group struct {
	n     int
	mu    sync.Mutex
	cond  *sync.Cond
	gen   uint64 // completed rendezvous
	count int    // ranks arrived at the current one
	err   error  // set by Abort
	posts []post
}

// post is one rank's part of a collective, readable by the others between
// the two rendezvous of the collective.
type post struct {
	kind       string
	call       uint64
	data       []byte // the bytes it sends (a view of its tensor on the CPU)
	dt         compute.DType
	rows, cols int
	sendCounts []int
	recvCounts []int
	op         Op
}

// NewLocal returns the ends of an in-process communicator among
// len(bes) ranks: rank r's end moves data in and out of bes[r]'s memory
// and must be used by one goroutine at a time (the one that runs rank r's
// ops on bes[r]).
func NewLocal(bes []compute.Backend) ([]*Local, error) {
	if len(bes) == 0 {
		return nil, fmt.Errorf("comm: a communicator of no ranks")
	}
	g := &group{n: len(bes), posts: make([]post, len(bes))}
	g.cond = sync.NewCond(&g.mu)
	ends := make([]*Local, len(bes))
	for r, be := range bes {
		if be == nil {
			return nil, fmt.Errorf("comm: rank %d has no backend", r)
		}
		_, host := be.(*cpu.Backend)
		ends[r] = &Local{g: g, rank: r, be: be, host: host}
	}
	return ends, nil
}

// Rank implements Comm.
func (c *Local) Rank() int { return c.rank }

// Size implements Comm.
func (c *Local) Size() int { return c.g.n }

// Abort implements Comm.
func (c *Local) Abort(err error) {
	g := c.g
	g.mu.Lock()
	if g.err == nil {
		if err == nil {
			err = fmt.Errorf("rank %d gave no reason", c.rank)
		}
		g.err = fmt.Errorf("%w by rank %d: %w", ErrAborted, c.rank, err)
	}
	g.cond.Broadcast()
	g.mu.Unlock()
}

// meet waits until every rank has reached it, or the communicator is
// aborted.
func (c *Local) meet() error {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return g.err
	}
	gen := g.gen
	g.count++
	if g.count == g.n {
		g.count = 0
		g.gen++
		g.cond.Broadcast()
		return nil
	}
	for g.gen == gen && g.err == nil {
		g.cond.Wait()
	}
	if g.gen == gen {
		return g.err
	}
	return nil
}

// fail aborts the communicator with a local error about this rank's
// arguments and returns it.
func (c *Local) fail(op string, err error) error {
	err = fmt.Errorf("comm: rank %d: %s: %w", c.rank, op, err)
	c.Abort(err)
	return err
}

// bytesOf returns the bytes of t on this rank: in place on the CPU, else a
// copy read from the backend.
func (c *Local) bytesOf(t compute.Tensor) ([]byte, error) {
	if !t.Valid() || t.Bytes() == 0 {
		return nil, nil
	}
	if c.host {
		return cpu.Bytes(t), nil
	}
	b := make([]byte, t.Bytes())
	if err := c.be.Read(b, t); err != nil {
		return nil, err
	}
	return b, nil
}

// exchange posts p, waits for every rank's post, checks that they agree
// (every rank runs the same check on the same posts, so all fail or none
// do), runs fill (which reads the posts and writes this rank's results)
// and waits until every rank is done reading.
func (c *Local) exchange(p post, fill func(posts []post) error) error {
	g := c.g
	c.calls++
	p.call = c.calls
	g.posts[c.rank] = p
	if err := c.meet(); err != nil {
		return err
	}
	if err := agree(g.posts); err != nil {
		err = fmt.Errorf("comm: %s, call %d: %w", p.kind, p.call, err)
		c.Abort(err)
		return err
	}
	ferr := fill(g.posts)
	if err := c.meet(); err != nil {
		return err
	}
	if ferr != nil {
		return c.fail(p.kind, ferr)
	}
	return nil
}

// agree checks that the ranks' posts are parts of one collective.
func agree(posts []post) error {
	p0 := posts[0]
	for r, p := range posts {
		if p.kind != p0.kind || p.call != p0.call {
			return fmt.Errorf("%w: rank 0 is at its call %d (%s), rank %d at its call %d (%s)", ErrMismatch, p0.call, p0.kind, r, p.call, p.kind)
		}
	}
	switch p0.kind {
	case "all-to-all":
		for i, p := range posts {
			for j, q := range posts {
				if p.sendCounts[j] != q.recvCounts[i] {
					return fmt.Errorf("%w: rank %d sends %d rows to rank %d, which expects %d", ErrMismatch, i, p.sendCounts[j], j, q.recvCounts[i])
				}
				if p.sendCounts[j] > 0 && (p.dt != q.dt || p.cols != q.cols) {
					return fmt.Errorf("%w: rank %d sends rows of %d %v to rank %d, which receives rows of %d %v", ErrMismatch, i, p.cols, p.dt, j, q.cols, q.dt)
				}
			}
		}
	case "all-gather", "all-reduce":
		for r, p := range posts {
			if p.dt != p0.dt || p.rows != p0.rows || p.cols != p0.cols || p.op != p0.op {
				return fmt.Errorf("%w: rank 0 passes %d×%d %v (%v), rank %d %d×%d %v (%v)", ErrMismatch, p0.rows, p0.cols, p0.dt, p0.op, r, p.rows, p.cols, p.dt, p.op)
			}
		}
	}
	return nil
}

// AllToAll implements Comm.
func (c *Local) AllToAll(recv compute.Tensor, recvCounts []int, send compute.Tensor, sendCounts []int) error {
	const op = "all-to-all"
	if err := CheckAllToAll(recv, recvCounts, send, sendCounts, c.g.n); err != nil {
		return c.fail(op, err)
	}
	total := 0
	for _, n := range sendCounts {
		total += n
	}
	data, err := c.bytesOf(send.Slice(0, min(total, max(send.Rows, 0))))
	if err != nil {
		return c.fail(op, err)
	}
	p := post{kind: op, data: data, dt: send.DT, cols: send.Cols, sendCounts: sendCounts, recvCounts: recvCounts}
	if total == 0 {
		p.dt, p.cols = recv.DT, recv.Cols
	}
	return c.exchange(p, func(posts []post) error {
		rtotal := 0
		for _, n := range recvCounts {
			rtotal += n
		}
		if rtotal == 0 {
			return nil
		}
		rb := recv.RowBytes()
		var dst []byte
		if c.host {
			dst = cpu.Bytes(recv.Slice(0, rtotal))
		} else {
			dst = make([]byte, int64(rtotal)*rb)
		}
		at := int64(0)
		for _, q := range posts {
			// Rank j's rows for this rank start after those it sends to
			// lower ranks.
			from := 0
			for i := range c.rank {
				from += q.sendCounts[i]
			}
			n := int64(q.sendCounts[c.rank]) * rb
			copy(dst[at:at+n], q.data[int64(from)*rb:int64(from)*rb+n])
			at += n
		}
		if !c.host {
			c.be.Write(recv.Slice(0, rtotal), dst)
		}
		return nil
	})
}

// AllGather implements Comm.
func (c *Local) AllGather(recv, send compute.Tensor) error {
	const op = "all-gather"
	if err := CheckAllGather(recv, send, c.g.n); err != nil {
		return c.fail(op, err)
	}
	data, err := c.bytesOf(send)
	if err != nil {
		return c.fail(op, err)
	}
	p := post{kind: op, data: data, dt: send.DT, rows: send.Rows, cols: send.Cols}
	return c.exchange(p, func(posts []post) error {
		var dst []byte
		if c.host {
			dst = cpu.Bytes(recv)
		} else {
			dst = make([]byte, recv.Bytes())
		}
		n := int64(len(data))
		for j, q := range posts {
			copy(dst[int64(j)*n:int64(j+1)*n], q.data)
		}
		if !c.host {
			c.be.Write(recv, dst)
		}
		return nil
	})
}

// AllReduce implements Comm: the reduction runs in rank order on every
// rank, so every rank gets the same bits.
func (c *Local) AllReduce(buf compute.Tensor, op Op) error {
	const kind = "all-reduce"
	if err := CheckAllReduce(buf, op); err != nil {
		return c.fail(kind, err)
	}
	data, err := c.bytesOf(buf)
	if err != nil {
		return c.fail(kind, err)
	}
	p := post{kind: kind, data: data, dt: buf.DT, rows: buf.Rows, cols: buf.Cols, op: op}
	var out []byte
	err = c.exchange(p, func(posts []post) error {
		// Into a copy: the others may still be reading this rank's buffer.
		parts := make([][]byte, len(posts))
		for j, q := range posts {
			parts[j] = q.data
		}
		out = reduce(buf.DT, op, parts)
		return nil
	})
	if err != nil {
		return err
	}
	if c.host {
		copy(cpu.Bytes(buf), out)
	} else {
		c.be.Write(buf, out)
	}
	return nil
}

// Barrier implements Comm.
func (c *Local) Barrier() error {
	return c.exchange(post{kind: "barrier"}, func([]post) error { return nil })
}
