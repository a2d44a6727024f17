package deepseekv4

import (
	"slices"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
)

// hostMemBackend is the CPU backend with compute.HostMemory: it records
// the sizes asked for and hands out Go memory it keeps.
type hostMemBackend struct {
	*cpu.Backend
	asked []int
	given [][]float32
}

func (b *hostMemBackend) HostFloats(n int) []float32 {
	b.asked = append(b.asked, n)
	v := make([]float32, n)
	b.given = append(b.given, v)
	return v
}

// TestReadLogitsHostMemory: readLogits reads into the backend's host
// memory where it has some, growing it by doubling and never shrinking
// it, and into Go memory past maxHostLogits or without it.
func TestReadLogitsHostMemory(t *testing.T) {
	be := &hostMemBackend{Backend: cpu.New(1)}
	var p passBufs
	read := func(rows, cols int) []float32 {
		t.Helper()
		out := be.Scratch(compute.F32, rows, cols)
		want := make([]float32, rows*cols)
		for i := range want {
			want[i] = float32(i%97) - float32(rows)
		}
		be.Write(out, want)
		lg, err := p.readLogits(be, out)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(lg, want) {
			t.Fatalf("readLogits %d×%d: the logits differ from the tensor's", rows, cols)
		}
		return lg
	}
	steps := []struct {
		rows, cols int
		asked      []int // HostFloats' requests so far
		host       bool  // the logits are in the backend's memory
	}{
		{1, 1000, []int{1000}, true},
		{1, 900, []int{1000}, true},              // fits: no new buffer
		{3, 1000, []int{1000, 3000}, true},       // grows to n
		{4, 1000, []int{1000, 3000, 6000}, true}, // grows by doubling
		{1, 10, []int{1000, 3000, 6000}, true},   // never shrinks
	}
	for i, s := range steps {
		lg := read(s.rows, s.cols)
		if !slices.Equal(be.asked, s.asked) {
			t.Fatalf("step %d: HostFloats asked for %v, want %v", i, be.asked, s.asked)
		}
		last := be.given[len(be.given)-1]
		if got := &lg[0] == &last[0]; got != s.host {
			t.Fatalf("step %d: logits in the backend's memory %v, want %v", i, got, s.host)
		}
	}
	// Without HostMemory: Go memory, as before.
	var q passBufs
	plain := cpu.New(1)
	out := plain.Scratch(compute.F32, 2, 8)
	if _, err := q.readLogits(plain, out); err != nil {
		t.Fatal(err)
	}
	if q.hostMem || len(q.logits) != 16 {
		t.Fatalf("readLogits on the CPU backend: hostMem %v, %d floats", q.hostMem, len(q.logits))
	}
}
