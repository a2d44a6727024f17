package nccl

import (
	"fmt"
	"sync"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/comm"
)

// Device is what a rank's backend offers the communicator: its memory, and
// NCCL calls run in order with its queued work on its locked CUDA thread.
type Device interface {
	compute.Memory
	// Ordinal is the CUDA device index of the rank's GPU.
	Ordinal() int
	// OnStream runs fn on the GPU's locked CUDA thread after the work
	// queued on the backend before it has been submitted, passing the
	// stream (CUstream) that work runs on: what fn enqueues there runs
	// after it and before the work queued after OnStream returns.
	OnStream(fn func(stream uintptr) error) error
	// DevicePointer is the device address of t's first byte (t is one of
	// the backend's tensors).
	DevicePointer(t compute.Tensor) (uintptr, error)
}

// Comm is one rank's end of an NCCL communicator. Its collectives must be
// called by one goroutine at a time (the one that runs the rank's ops);
// Abort may be called from any.
type Comm struct {
	api        api
	comm       uintptr
	rank, size int
	dev        Device
	one        compute.Tensor // I32 [1]: Barrier's all-reduce

	mu      sync.Mutex
	aborted error
}

var _ comm.Comm = (*Comm)(nil)

// New makes the communicators of len(devs) ranks, rank r on devs[r],
// together (ncclCommInitAll on rank 0's thread). The GPUs must be
// distinct.
func New(lib *Library, devs []Device) ([]*Comm, error) {
	if lib == nil || lib.api == nil {
		return nil, fmt.Errorf("nccl: no library")
	}
	return newComms(lib.api, devs)
}

func newComms(a api, devs []Device) ([]*Comm, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("nccl: a communicator of no ranks")
	}
	ords := make([]int32, len(devs))
	seen := map[int]int{}
	for r, d := range devs {
		if d == nil {
			return nil, fmt.Errorf("nccl: rank %d has no device", r)
		}
		o := d.Ordinal()
		if o < 0 {
			return nil, fmt.Errorf("nccl: rank %d is on GPU %d", r, o)
		}
		if q, dup := seen[o]; dup {
			return nil, fmt.Errorf("nccl: ranks %d and %d are both on GPU %d", q, r, o)
		}
		seen[o] = r
		ords[r] = int32(o)
	}
	var handles []uintptr
	err := devs[0].OnStream(func(uintptr) error {
		var err error
		handles, err = a.commInitAll(ords)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nccl: making the communicators of GPUs %v: %w", ords, err)
	}
	cs := make([]*Comm, len(devs))
	for r, d := range devs {
		one, err := d.Alloc(compute.I32, 1, 1)
		if err != nil {
			for _, h := range handles {
				a.commDestroy(h)
			}
			return nil, fmt.Errorf("nccl: rank %d: %w", r, err)
		}
		cs[r] = &Comm{api: a, comm: handles[r], rank: r, size: len(devs), dev: d, one: one}
	}
	return cs, nil
}

// Rank implements comm.Comm.
func (c *Comm) Rank() int { return c.rank }

// Size implements comm.Comm.
func (c *Comm) Size() int { return c.size }

// Abort implements comm.Comm with ncclCommAbort, which may be called
// from any thread and releases the calls blocked in this communicator.
func (c *Comm) Abort(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aborted != nil {
		return
	}
	if err == nil {
		err = fmt.Errorf("rank %d gave no reason", c.rank)
	}
	c.aborted = fmt.Errorf("%w on rank %d: %w", comm.ErrAborted, c.rank, err)
	c.api.commAbort(c.comm)
}

func (c *Comm) live() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.aborted
}

// fail aborts the communicator for an error of this rank (NCCL cannot
// tell the other ranks, which would wait forever) and returns it.
func (c *Comm) fail(op string, err error) error {
	err = fmt.Errorf("nccl: rank %d (GPU %d): %s: %w", c.rank, c.dev.Ordinal(), op, err)
	c.Abort(err)
	return err
}

// ptr is t's device address, or 0 for the zero Tensor.
func (c *Comm) ptr(t compute.Tensor) (uintptr, error) {
	if !t.Valid() {
		return 0, nil
	}
	return c.dev.DevicePointer(t)
}

// AllToAll implements comm.Comm with ncclSend and ncclRecv to and from
// every rank with rows to move, in one group; the rows travel as bytes.
func (c *Comm) AllToAll(recv compute.Tensor, recvCounts []int, send compute.Tensor, sendCounts []int) error {
	const op = "all-to-all"
	if err := c.live(); err != nil {
		return err
	}
	if err := comm.CheckAllToAll(recv, recvCounts, send, sendCounts, c.size); err != nil {
		return c.fail(op, err)
	}
	err := c.dev.OnStream(func(s uintptr) error {
		sp, err := c.ptr(send)
		if err != nil {
			return err
		}
		rp, err := c.ptr(recv)
		if err != nil {
			return err
		}
		sb, rb := uintptr(send.RowBytes()), uintptr(recv.RowBytes())
		if err := c.api.groupStart(); err != nil {
			return err
		}
		var first error
		keep := func(err error) {
			if first == nil {
				first = err
			}
		}
		var so, ro uintptr
		for j := range c.size {
			if n := uintptr(sendCounts[j]); n > 0 {
				keep(c.api.send(sp+so*sb, int(n*sb), ncclUint8, j, c.comm, s))
				so += n
			}
			if n := uintptr(recvCounts[j]); n > 0 {
				keep(c.api.recv(rp+ro*rb, int(n*rb), ncclUint8, j, c.comm, s))
				ro += n
			}
		}
		keep(c.api.groupEnd())
		return first
	})
	if err != nil {
		return c.fail(op, err)
	}
	return nil
}

// AllGather implements comm.Comm with ncclAllGather of bytes.
func (c *Comm) AllGather(recv, send compute.Tensor) error {
	const op = "all-gather"
	if err := c.live(); err != nil {
		return err
	}
	if err := comm.CheckAllGather(recv, send, c.size); err != nil {
		return c.fail(op, err)
	}
	err := c.dev.OnStream(func(s uintptr) error {
		sp, err := c.ptr(send)
		if err != nil {
			return err
		}
		rp, err := c.ptr(recv)
		if err != nil {
			return err
		}
		return c.api.allGather(sp, rp, int(send.Bytes()), ncclUint8, c.comm, s)
	})
	if err != nil {
		return c.fail(op, err)
	}
	return nil
}

// AllReduce implements comm.Comm with ncclAllReduce in place (NCCL's
// order of summation, not necessarily rank order).
func (c *Comm) AllReduce(buf compute.Tensor, op comm.Op) error {
	const kind = "all-reduce"
	if err := c.live(); err != nil {
		return err
	}
	if err := comm.CheckAllReduce(buf, op); err != nil {
		return c.fail(kind, err)
	}
	dt := ncclFloat32
	if buf.DT == compute.I32 {
		dt = ncclInt32
	}
	ro := map[comm.Op]redOp{comm.Sum: ncclSum, comm.Max: ncclMax, comm.Min: ncclMin}[op]
	err := c.dev.OnStream(func(s uintptr) error {
		p, err := c.ptr(buf)
		if err != nil {
			return err
		}
		return c.api.allReduce(p, p, buf.Len(), dt, ro, c.comm, s)
	})
	if err != nil {
		return c.fail(kind, err)
	}
	return nil
}

// Barrier implements comm.Comm: an all-reduce of one integer that this
// rank waits for, then a check for asynchronous NCCL errors.
func (c *Comm) Barrier() error {
	if err := c.AllReduce(c.one, comm.Sum); err != nil {
		return err
	}
	if err := c.dev.Sync(); err != nil {
		return c.fail("barrier", err)
	}
	if err := c.api.commAsyncError(c.comm); err != nil {
		return c.fail("barrier", err)
	}
	return nil
}

// Close destroys the communicator on the rank's thread (after the work
// queued before).
func (c *Comm) Close() error {
	c.dev.Free(c.one)
	return c.dev.OnStream(func(uintptr) error { return c.api.commDestroy(c.comm) })
}
