// Package comm defines the collectives that expert, tensor and data
// parallelism need between the ranks of one model (all-to-all with
// variable counts, all-gather, all-reduce, barrier), written for any number
// of ranks, and an in-process implementation over several backends
// (NewLocal: one goroutine per rank, the CPU version). The NCCL
// implementation for GPUs is in the nccl subpackage.
//
// A communicator has one end per rank; each rank's goroutine calls the same
// collectives in the same order with its own end (as NCCL requires: there
// is no tag matching). Every tensor a rank passes lives in that rank's
// backend's memory. Like a Backend's ops, a collective returns once its
// work is queued (a GPU: ordered before the ops queued after it on the
// rank's stream, its result visible to a later Read or Sync) or done (the
// CPU).
package comm

import (
	"errors"
	"fmt"

	"github.com/strata-inference/strata/compute"
)

// Comm is one rank's end of a communicator among Size ranks.
type Comm interface {
	// Rank is this end's rank, in [0, Size).
	Rank() int
	// Size is the number of ranks.
	Size() int
	// AllToAll sends to every rank j the sendCounts[j] rows of send that
	// start at row sendCounts[0]+…+sendCounts[j-1], and receives from every
	// rank j recvCounts[j] rows into recv starting at row
	// recvCounts[0]+…+recvCounts[j-1]: what rank j sends to this rank, in
	// its order. send and recv have the same dtype and width; the counts
	// must add up to at most their rows, and recvCounts[j] must equal what
	// rank j passes as sendCounts[Rank()] (ExchangeCounts tells a rank).
	// A tensor whose counts are all zero may be the zero Tensor.
	AllToAll(recv compute.Tensor, recvCounts []int, send compute.Tensor, sendCounts []int) error
	// AllGather writes every rank's send, in rank order, into recv:
	// rank j's rows land at rows [j·send.Rows, (j+1)·send.Rows). Every rank
	// passes the same shape; recv has Size·send.Rows rows of send's width.
	AllGather(recv, send compute.Tensor) error
	// AllReduce replaces buf (F32 or I32, the same shape on every rank)
	// on every rank with its elementwise reduction over the ranks.
	AllReduce(buf compute.Tensor, op Op) error
	// Barrier returns once every rank has called it.
	Barrier() error
	// Abort fails the collective in flight and every later one on every
	// rank with an error wrapping ErrAborted and err: a rank that cannot
	// go on calls it so that the others do not wait for it forever. The
	// communicator is unusable afterwards.
	Abort(err error)
}

// Op is a reduction.
type Op int

const (
	Sum Op = iota // elementwise sum over the ranks
	Max           // elementwise maximum
	Min           // elementwise minimum
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// ErrAborted is wrapped by the errors of collectives on an aborted
// communicator.
var ErrAborted = errors.New("comm: communicator aborted")

// ErrMismatch is wrapped by the errors of a collective the ranks called
// inconsistently (different collectives, shapes or counts that do not
// pair up); every rank gets it.
var ErrMismatch = errors.New("comm: ranks disagree")

// ExchangeCounts is the all-to-all of one integer per pair of ranks: it
// returns, for every rank j, what rank j passed as send[c.Rank()]. The
// values travel through be (the rank's backend) in scratch memory, which
// it releases before returning.
func ExchangeCounts(c Comm, be compute.Memory, send []int) ([]int, error) {
	n := c.Size()
	if len(send) != n {
		err := fmt.Errorf("comm: rank %d exchanges %d counts among %d ranks", c.Rank(), len(send), n)
		c.Abort(err)
		return nil, err
	}
	mark := be.ScratchMark()
	defer be.ResetScratch(mark)
	out := be.Scratch(compute.I32, n, 1)
	in := be.Scratch(compute.I32, n, 1)
	v := make([]int32, n)
	for j, s := range send {
		if s < 0 || s > 1<<31-1 {
			err := fmt.Errorf("comm: rank %d sends count %d to rank %d", c.Rank(), s, j)
			c.Abort(err)
			return nil, err
		}
		v[j] = int32(s)
	}
	be.Write(out, v)
	ones := make([]int, n)
	for j := range ones {
		ones[j] = 1
	}
	if err := c.AllToAll(in, ones, out, ones); err != nil {
		return nil, err
	}
	if err := be.Read(v, in); err != nil {
		return nil, fmt.Errorf("comm: rank %d reading exchanged counts: %w", c.Rank(), err)
	}
	recv := make([]int, n)
	for j, x := range v {
		recv[j] = int(x)
	}
	return recv, nil
}

// checkCounts checks one side of an all-to-all: one count per rank, none
// negative, adding up to at most t's rows. It returns their sum.
func checkCounts(side string, t compute.Tensor, counts []int, n int) (int, error) {
	if len(counts) != n {
		return 0, fmt.Errorf("%d %s counts among %d ranks", len(counts), side, n)
	}
	total := 0
	for j, c := range counts {
		if c < 0 {
			return 0, fmt.Errorf("%s count %d for rank %d", side, c, j)
		}
		total += c
	}
	if total > 0 && !t.Valid() {
		return 0, fmt.Errorf("%d rows to %s but no %s tensor", total, side, side)
	}
	if t.Valid() && total > t.Rows {
		return 0, fmt.Errorf("%d rows to %s in a tensor of %d", total, side, t.Rows)
	}
	return total, nil
}

// CheckAllToAll checks one rank's arguments of AllToAll among n ranks
// (implementations call it before they move anything).
func CheckAllToAll(recv compute.Tensor, recvCounts []int, send compute.Tensor, sendCounts []int, n int) error {
	s, err := checkCounts("send", send, sendCounts, n)
	if err != nil {
		return err
	}
	r, err := checkCounts("receive", recv, recvCounts, n)
	if err != nil {
		return err
	}
	if s > 0 && r > 0 && (send.DT != recv.DT || send.Cols != recv.Cols) {
		return fmt.Errorf("send rows of %d %v, receive rows of %d %v", send.Cols, send.DT, recv.Cols, recv.DT)
	}
	for _, t := range []compute.Tensor{send, recv} {
		if t.Valid() && t.DT.Size() == 0 {
			return fmt.Errorf("rows of %v cannot be sent (no whole bytes per element)", t.DT)
		}
	}
	return nil
}

// CheckAllGather checks one rank's arguments of AllGather among n ranks.
func CheckAllGather(recv, send compute.Tensor, n int) error {
	if !send.Valid() || !recv.Valid() {
		return fmt.Errorf("all-gather needs both tensors")
	}
	if send.DT.Size() == 0 {
		return fmt.Errorf("rows of %v cannot be gathered (no whole bytes per element)", send.DT)
	}
	if recv.DT != send.DT || recv.Cols != send.Cols || recv.Rows != n*send.Rows {
		return fmt.Errorf("gathering %d×%d %v from %d ranks into %d×%d %v", send.Rows, send.Cols, send.DT, n, recv.Rows, recv.Cols, recv.DT)
	}
	return nil
}

// CheckAllReduce checks one rank's arguments of AllReduce.
func CheckAllReduce(buf compute.Tensor, op Op) error {
	if !buf.Valid() {
		return fmt.Errorf("all-reduce of no tensor")
	}
	if buf.DT != compute.F32 && buf.DT != compute.I32 {
		return fmt.Errorf("all-reduce of %v (want f32 or i32)", buf.DT)
	}
	switch op {
	case Sum, Max, Min:
	default:
		return fmt.Errorf("all-reduce with %v", op)
	}
	return nil
}
