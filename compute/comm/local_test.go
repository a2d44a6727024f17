package comm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
)

// opaque hides the CPU backend's type, so that Local takes the path any
// other backend takes (Read and Write through host memory).
type opaque struct{ compute.Backend }

// ranks makes n in-process ends, over CPU backends or (generic) over
// backends Local does not recognize.
func ranks(t *testing.T, n int, generic bool) []*Local {
	t.Helper()
	bes := make([]compute.Backend, n)
	for r := range bes {
		bes[r] = cpu.New(1)
		if generic {
			bes[r] = opaque{bes[r]}
		}
	}
	cs, err := NewLocal(bes)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// run calls fn for every rank on its own goroutine and returns the ranks'
// errors.
func run(cs []*Local, fn func(c *Local) error) []error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(c)
		}()
	}
	wg.Wait()
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestAllToAll sends rows with random counts between every pair of ranks
// (zero included) and checks every rank receives, in rank order, exactly
// the rows each sender meant for it, for 1 to 4 ranks.
func TestAllToAll(t *testing.T) {
	for _, generic := range []bool{false, true} {
		for n := 1; n <= 4; n++ {
			t.Run(fmt.Sprintf("ranks=%d/generic=%v", n, generic), func(t *testing.T) {
				const D = 5
				rng := rand.New(rand.NewPCG(uint64(n), 7))
				// counts[i][j]: rows rank i sends to rank j; row values
				// encode (sender, receiver, index).
				counts := make([][]int, n)
				for i := range counts {
					counts[i] = make([]int, n)
					for j := range counts[i] {
						counts[i][j] = rng.IntN(4)
					}
				}
				val := func(i, j, k, c int) float32 { return float32(i*1000 + j*100 + k*10 + c) }
				got := make([][]float32, n)
				errs := run(ranks(t, n, generic), func(c *Local) error {
					i := c.Rank()
					var send []float32
					for j := range n {
						for k := range counts[i][j] {
							for col := range D {
								send = append(send, val(i, j, k, col))
							}
						}
					}
					recvCounts := make([]int, n)
					rows := 0
					for j := range n {
						recvCounts[j] = counts[j][i]
						rows += counts[j][i]
					}
					be := c.be
					st := be.Scratch(compute.F32, len(send)/D+1, D) // one spare row
					if len(send) > 0 {
						be.Write(st.Slice(0, len(send)/D), send)
					}
					rt := be.Scratch(compute.F32, rows+2, D)
					if err := c.AllToAll(rt, recvCounts, st, counts[i]); err != nil {
						return err
					}
					got[i] = make([]float32, rows*D)
					if rows > 0 {
						return be.Read(got[i], rt.Slice(0, rows))
					}
					return nil
				})
				noErrors(t, errs)
				for j := range n {
					var want []float32
					for i := range n {
						for k := range counts[i][j] {
							for col := range D {
								want = append(want, val(i, j, k, col))
							}
						}
					}
					if fmt.Sprint(got[j]) != fmt.Sprint(want) {
						t.Errorf("rank %d received %v, want %v", j, got[j], want)
					}
				}
			})
		}
	}
}

// TestAllGatherReduce checks all-gather against the concatenation and
// all-reduce against the reduction in rank order, computed here, bit for
// bit, for f32 and i32.
func TestAllGatherReduce(t *testing.T) {
	for _, generic := range []bool{false, true} {
		for n := 1; n <= 3; n++ {
			t.Run(fmt.Sprintf("ranks=%d/generic=%v", n, generic), func(t *testing.T) {
				const R, D = 2, 3
				data := make([][]float32, n)
				ints := make([][]int32, n)
				rng := rand.New(rand.NewPCG(3, uint64(n)))
				for r := range n {
					for range R * D {
						data[r] = append(data[r], rng.Float32()*100-50)
						ints[r] = append(ints[r], int32(rng.IntN(200)-100))
					}
				}
				gathered := make([][]float32, n)
				sums := make([][]float32, n)
				maxes := make([][]int32, n)
				errs := run(ranks(t, n, generic), func(c *Local) error {
					r, be := c.Rank(), c.be
					send := be.Scratch(compute.F32, R, D)
					be.Write(send, data[r])
					recv := be.Scratch(compute.F32, n*R, D)
					if err := c.AllGather(recv, send); err != nil {
						return err
					}
					gathered[r] = make([]float32, n*R*D)
					if err := be.Read(gathered[r], recv); err != nil {
						return err
					}
					if err := c.AllReduce(send, Sum); err != nil {
						return err
					}
					sums[r] = make([]float32, R*D)
					if err := be.Read(sums[r], send); err != nil {
						return err
					}
					it := be.Scratch(compute.I32, R, D)
					be.Write(it, ints[r])
					if err := c.AllReduce(it, Max); err != nil {
						return err
					}
					maxes[r] = make([]int32, R*D)
					if err := be.Read(maxes[r], it); err != nil {
						return err
					}
					return c.Barrier()
				})
				noErrors(t, errs)
				var cat []float32
				for r := range n {
					cat = append(cat, data[r]...)
				}
				sum := append([]float32(nil), data[0]...)
				mx := append([]int32(nil), ints[0]...)
				for r := 1; r < n; r++ {
					for i := range sum {
						sum[i] += data[r][i]
						mx[i] = max(mx[i], ints[r][i])
					}
				}
				for r := range n {
					if fmt.Sprint(gathered[r]) != fmt.Sprint(cat) {
						t.Errorf("rank %d gathered %v, want %v", r, gathered[r], cat)
					}
					for i := range sum {
						if sums[r][i] != sum[i] {
							t.Errorf("rank %d: sum[%d] = %v, want %v (rank order)", r, i, sums[r][i], sum[i])
						}
					}
					if fmt.Sprint(maxes[r]) != fmt.Sprint(mx) {
						t.Errorf("rank %d: max %v, want %v", r, maxes[r], mx)
					}
				}
			})
		}
	}
}

// TestExchangeCounts: every rank learns what each other rank sends it.
func TestExchangeCounts(t *testing.T) {
	const n = 3
	got := make([][]int, n)
	noErrors(t, run(ranks(t, n, false), func(c *Local) error {
		send := make([]int, n)
		for j := range send {
			send[j] = 10*c.Rank() + j
		}
		var err error
		got[c.Rank()], err = ExchangeCounts(c, c.be, send)
		return err
	}))
	for j := range n {
		for i := range n {
			if got[j][i] != 10*i+j {
				t.Errorf("rank %d: from rank %d %d, want %d", j, i, got[j][i], 10*i+j)
			}
		}
	}
}

// TestMismatch: ranks that call different collectives, or counts that do
// not pair up, fail on every rank with ErrMismatch (NCCL would hang).
func TestMismatch(t *testing.T) {
	cs := ranks(t, 2, false)
	errs := run(cs, func(c *Local) error {
		if c.Rank() == 0 {
			return c.Barrier()
		}
		b := c.be.Scratch(compute.F32, 1, 1)
		return c.AllReduce(b, Sum)
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("rank %d: %v, want ErrMismatch", r, err)
		}
	}
	// The communicator is now aborted for good.
	if err := run(cs, func(c *Local) error { return c.Barrier() }); !errors.Is(err[0], ErrAborted) || !errors.Is(err[1], ErrAborted) {
		t.Errorf("after a mismatch: %v, want ErrAborted", err)
	}

	cs = ranks(t, 2, false)
	errs = run(cs, func(c *Local) error {
		be := c.be
		x := be.Scratch(compute.F32, 4, 2)
		// Rank 0 sends 2 rows to rank 1, which expects 1.
		send := [][]int{{0, 2}, {1, 0}}[c.Rank()]
		recv := [][]int{{0, 1}, {1, 0}}[c.Rank()]
		return c.AllToAll(be.Scratch(compute.F32, 4, 2), recv, x, send)
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("counts: rank %d: %v, want ErrMismatch", r, err)
		}
	}
}

// TestBadArguments: a rank's own bad arguments fail it and release the
// others (aborted) instead of leaving them waiting.
func TestBadArguments(t *testing.T) {
	cs := ranks(t, 3, false)
	errs := run(cs, func(c *Local) error {
		be := c.be
		x := be.Scratch(compute.F32, 2, 2)
		counts := []int{1, 1, 1} // 3 rows out of a tensor of 2
		if c.Rank() != 1 {
			counts = []int{0, 0, 0}
		}
		return c.AllToAll(be.Scratch(compute.F32, 3, 2), []int{0, 0, 0}, x, counts)
	})
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d: no error", r)
		}
	}
	if !errors.Is(errs[0], ErrAborted) || !errors.Is(errs[2], ErrAborted) {
		t.Errorf("the other ranks: %v, %v; want ErrAborted", errs[0], errs[2])
	}
}

// TestAbortReleasesWaiters: a rank that aborts while the others wait in a
// collective releases them with its reason.
func TestAbortReleasesWaiters(t *testing.T) {
	cs := ranks(t, 3, false)
	reason := errors.New("rank 2 failed its forward pass")
	errs := run(cs, func(c *Local) error {
		if c.Rank() == 2 {
			c.Abort(reason)
			return nil
		}
		return c.Barrier()
	})
	for r := range 2 {
		if !errors.Is(errs[r], ErrAborted) || !errors.Is(errs[r], reason) {
			t.Errorf("rank %d: %v, want ErrAborted wrapping the reason", r, errs[r])
		}
	}
}
