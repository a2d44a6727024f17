package nccl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/comm"
	"github.com/strata-inference/strata/compute/cpu"
)

// scripted is a stand-in for the library: it records the calls it gets
// and fails the ones named in fail.
type scripted struct {
	calls []string
	fail  map[string]int // call name -> ncclResult_t
}

func (s *scripted) do(name, args string) error {
	s.calls = append(s.calls, name+"("+args+")")
	if code, ok := s.fail[name]; ok {
		return &Error{Call: name, Code: code, Msg: "scripted failure"}
	}
	return nil
}

func (s *scripted) version() (int, error) { return 22305, s.do("ncclGetVersion", "") }
func (s *scripted) commInitAll(devs []int32) ([]uintptr, error) {
	hs := make([]uintptr, len(devs))
	for i := range hs {
		hs[i] = uintptr(0xC0 + i)
	}
	return hs, s.do("ncclCommInitAll", fmt.Sprint(devs))
}
func (s *scripted) commDestroy(c uintptr) error {
	return s.do("ncclCommDestroy", fmt.Sprintf("%#x", c))
}
func (s *scripted) commAbort(c uintptr) error { return s.do("ncclCommAbort", fmt.Sprintf("%#x", c)) }
func (s *scripted) commAsyncError(c uintptr) error {
	return s.do("ncclCommGetAsyncError", fmt.Sprintf("%#x", c))
}
func (s *scripted) allReduce(send, recv uintptr, n int, dt dataType, op redOp, c, st uintptr) error {
	return s.do("ncclAllReduce", fmt.Sprintf("%#x %#x %d dt%d op%d %#x %#x", send, recv, n, dt, op, c, st))
}
func (s *scripted) allGather(send, recv uintptr, n int, dt dataType, c, st uintptr) error {
	return s.do("ncclAllGather", fmt.Sprintf("%#x %#x %d dt%d %#x %#x", send, recv, n, dt, c, st))
}
func (s *scripted) send(buf uintptr, n int, dt dataType, peer int, c, st uintptr) error {
	return s.do("ncclSend", fmt.Sprintf("%#x %d dt%d peer%d %#x %#x", buf, n, dt, peer, c, st))
}
func (s *scripted) recv(buf uintptr, n int, dt dataType, peer int, c, st uintptr) error {
	return s.do("ncclRecv", fmt.Sprintf("%#x %d dt%d peer%d %#x %#x", buf, n, dt, peer, c, st))
}
func (s *scripted) groupStart() error { return s.do("ncclGroupStart", "") }
func (s *scripted) groupEnd() error   { return s.do("ncclGroupEnd", "") }

// fakeGPU is a Device over CPU memory: tensors' "device addresses" are a
// base per GPU plus the tensor's offset; OnStream runs fn at once with a
// stream that names the GPU.
type fakeGPU struct {
	compute.Backend
	ord     int
	onCalls int
	failPtr bool
}

func (g *fakeGPU) Ordinal() int { return g.ord }
func (g *fakeGPU) OnStream(fn func(uintptr) error) error {
	g.onCalls++
	return fn(uintptr(0x5000 + g.ord))
}
func (g *fakeGPU) DevicePointer(t compute.Tensor) (uintptr, error) {
	if g.failPtr {
		return 0, errors.New("not this backend's tensor")
	}
	return uintptr(0x100000*(g.ord+1)) + uintptr(t.Off), nil
}

func comms(t *testing.T, s *scripted, ords ...int) ([]*Comm, []*fakeGPU) {
	t.Helper()
	gpus := make([]*fakeGPU, len(ords))
	devs := make([]Device, len(ords))
	for i, o := range ords {
		gpus[i] = &fakeGPU{Backend: cpu.New(1), ord: o}
		devs[i] = gpus[i]
	}
	cs, err := newComms(s, devs)
	if err != nil {
		t.Fatal(err)
	}
	s.calls = nil
	return cs, gpus
}

// TestInit: the communicators are made in one ncclCommInitAll on rank 0's
// thread, over the ranks' GPUs in rank order; duplicate or missing GPUs
// are refused before NCCL is called.
func TestInit(t *testing.T) {
	s := &scripted{}
	devs := []Device{&fakeGPU{Backend: cpu.New(1), ord: 1}, &fakeGPU{Backend: cpu.New(1), ord: 0}}
	cs, err := newComms(s, devs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ncclCommInitAll([1 0])"}; fmt.Sprint(s.calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", s.calls, want)
	}
	if devs[0].(*fakeGPU).onCalls != 1 || devs[1].(*fakeGPU).onCalls != 0 {
		t.Errorf("init ran on the threads %d, %d times; want rank 0's once", devs[0].(*fakeGPU).onCalls, devs[1].(*fakeGPU).onCalls)
	}
	if cs[1].Rank() != 1 || cs[1].Size() != 2 || cs[1].comm != 0xC1 {
		t.Errorf("rank 1: rank %d size %d handle %#x", cs[1].Rank(), cs[1].Size(), cs[1].comm)
	}
	s.calls = nil
	_, err = newComms(s, []Device{&fakeGPU{Backend: cpu.New(1), ord: 0}, &fakeGPU{Backend: cpu.New(1), ord: 0}})
	if err == nil || !strings.Contains(err.Error(), "both on GPU 0") || len(s.calls) != 0 {
		t.Errorf("duplicate GPUs: %v (calls %v)", err, s.calls)
	}
	s.fail = map[string]int{"ncclCommInitAll": 5}
	_, err = newComms(s, []Device{&fakeGPU{Backend: cpu.New(1), ord: 0}})
	var ne *Error
	if !errors.As(err, &ne) || ne.Code != 5 || !strings.Contains(err.Error(), "ncclInvalidUsage") {
		t.Errorf("failed init: %v", err)
	}
}

// TestAllToAllCalls: an all-to-all is one group of a send and a receive
// per peer with rows to move, at the byte offsets of the peer's rows,
// counted in bytes; peers with nothing to move get no call.
func TestAllToAllCalls(t *testing.T) {
	s := &scripted{}
	cs, gpus := comms(t, s, 0, 1, 2)
	c := cs[1]
	be := gpus[1]
	send, _ := be.Alloc(compute.F32, 5, 4) // rows of 16 bytes
	recv, _ := be.Alloc(compute.F32, 6, 4)
	recv = recv.Slice(1, 6) // at byte 16 of its buffer
	if err := c.AllToAll(recv, []int{3, 0, 2}, send, []int{2, 0, 3}); err != nil {
		t.Fatal(err)
	}
	sb, rb := 0x200000, 0x200000+16
	want := []string{
		"ncclGroupStart()",
		fmt.Sprintf("ncclSend(%#x 32 dt1 peer0 0xc1 0x5001)", sb),
		fmt.Sprintf("ncclRecv(%#x 48 dt1 peer0 0xc1 0x5001)", rb),
		fmt.Sprintf("ncclSend(%#x 48 dt1 peer2 0xc1 0x5001)", sb+32),
		fmt.Sprintf("ncclRecv(%#x 32 dt1 peer2 0xc1 0x5001)", rb+48),
		"ncclGroupEnd()",
	}
	if strings.Join(s.calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(s.calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestArgumentChecks: a rank's bad arguments fail before NCCL moves
// anything, and abort the communicator (NCCL cannot tell the other ranks,
// which would wait for this one forever).
func TestArgumentChecks(t *testing.T) {
	cases := []struct {
		name string
		call func(c *Comm, be compute.Backend) error
		want string
	}{
		{"counts per rank", func(c *Comm, be compute.Backend) error {
			x, _ := be.Alloc(compute.F32, 4, 2)
			return c.AllToAll(x, []int{1, 1}, x, []int{1})
		}, "1 send counts among 2 ranks"},
		{"more rows than the tensor", func(c *Comm, be compute.Backend) error {
			x, _ := be.Alloc(compute.F32, 2, 2)
			y, _ := be.Alloc(compute.F32, 8, 2)
			return c.AllToAll(y, []int{0, 0}, x, []int{2, 1})
		}, "3 rows to send in a tensor of 2"},
		{"negative count", func(c *Comm, be compute.Backend) error {
			x, _ := be.Alloc(compute.F32, 2, 2)
			return c.AllToAll(x, []int{-1, 0}, x, []int{0, 0})
		}, "receive count -1"},
		{"widths differ", func(c *Comm, be compute.Backend) error {
			x, _ := be.Alloc(compute.F32, 2, 2)
			y, _ := be.Alloc(compute.F32, 2, 3)
			return c.AllToAll(y, []int{1, 0}, x, []int{1, 0})
		}, "send rows of 2 f32, receive rows of 3 f32"},
		{"rows to nowhere", func(c *Comm, be compute.Backend) error {
			x, _ := be.Alloc(compute.F32, 2, 2)
			return c.AllToAll(compute.Tensor{}, []int{1, 0}, x, []int{1, 0})
		}, "no receive tensor"},
		{"gather shape", func(c *Comm, be compute.Backend) error {
			x, _ := be.Alloc(compute.F32, 2, 2)
			return c.AllGather(x, x)
		}, "gathering 2×2 f32 from 2 ranks into 2×2 f32"},
		{"reduce dtype", func(c *Comm, be compute.Backend) error {
			x, _ := be.Alloc(compute.U8, 1, 4)
			return c.AllReduce(x, comm.Sum)
		}, "all-reduce of u8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{}
			cs, gpus := comms(t, s, 0, 3)
			err := tc.call(cs[1], gpus[1])
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rank 1 (GPU 3)") {
				t.Fatalf("error %v, want one about rank 1 (GPU 3) saying %q", err, tc.want)
			}
			if fmt.Sprint(s.calls) != "[ncclCommAbort(0xc1)]" {
				t.Errorf("calls %v, want only the abort", s.calls)
			}
			if err := cs[1].Barrier(); !errors.Is(err, comm.ErrAborted) {
				t.Errorf("after the failure: %v, want ErrAborted", err)
			}
		})
	}
}

// TestCallErrors: an NCCL failure says which call failed with NCCL's code
// and aborts; the group is always closed.
func TestCallErrors(t *testing.T) {
	s := &scripted{fail: map[string]int{"ncclSend": 2}}
	cs, gpus := comms(t, s, 0, 1)
	x, _ := gpus[0].Alloc(compute.F32, 2, 2)
	err := cs[0].AllToAll(x, []int{1, 0}, x.Slice(0, 1), []int{0, 1})
	var ne *Error
	if !errors.As(err, &ne) || ne.Code != 2 || !strings.Contains(err.Error(), "ncclSystemError") {
		t.Fatalf("error %v, want the send's ncclSystemError", err)
	}
	if got := strings.Join(s.calls, " "); !strings.Contains(got, "ncclGroupEnd()") || !strings.HasSuffix(got, "ncclCommAbort(0xc0)") {
		t.Errorf("calls %s: want the group closed, then the abort", got)
	}

	s = &scripted{}
	cs, gpus = comms(t, s, 0, 1)
	gpus[1].failPtr = true
	y, _ := gpus[1].Alloc(compute.F32, 2, 2)
	if err := cs[1].AllGather(y.Reshape(4, 1), y.Reshape(4, 1).Slice(0, 2)); err == nil || !strings.Contains(err.Error(), "not this backend's tensor") {
		t.Errorf("pointer failure: %v", err)
	}
}

// TestReduceAndBarrier: all-reduce maps dtypes and ops to NCCL's and works
// in place; a barrier is an all-reduce of the rank's own integer, then a
// wait and a check for asynchronous errors.
func TestReduceAndBarrier(t *testing.T) {
	s := &scripted{}
	cs, gpus := comms(t, s, 0, 1)
	x, _ := gpus[0].Alloc(compute.I32, 3, 1)
	if err := cs[0].AllReduce(x, comm.Max); err != nil {
		t.Fatal(err)
	}
	if err := cs[0].Barrier(); err != nil {
		t.Fatal(err)
	}
	p := 0x100000
	want := []string{
		fmt.Sprintf("ncclAllReduce(%#x %#x 3 dt2 op2 0xc0 0x5000)", p, p),
		fmt.Sprintf("ncclAllReduce(%#x %#x 1 dt2 op0 0xc0 0x5000)", p+int(cs[0].one.Off), p+int(cs[0].one.Off)),
		"ncclCommGetAsyncError(0xc0)",
	}
	if fmt.Sprint(s.calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", s.calls, want)
	}
	s.calls = nil
	if err := cs[1].Close(); err != nil || fmt.Sprint(s.calls) != "[ncclCommDestroy(0xc1)]" {
		t.Errorf("close: %v, calls %v", err, s.calls)
	}
}

// TestVersions: version codes of both encodings.
func TestVersions(t *testing.T) {
	for v, want := range map[int]string{2708: "2.7.8", 21903: "2.19.3", 22703: "2.27.3"} {
		if got := versionString(v); got != want {
			t.Errorf("%d: %s, want %s", v, got, want)
		}
	}
	if normalizeVersion(2604) >= minVersion || normalizeVersion(2708) < minVersion {
		t.Errorf("2.6.4 / 2.7.8 against the minimum %d: %d / %d", minVersion, normalizeVersion(2604), normalizeVersion(2708))
	}
}
