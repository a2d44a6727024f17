package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"
)

// Ptr is a device address (CUdeviceptr); 0 is no buffer.
type Ptr uint64

// Add returns p advanced by n bytes.
func (p Ptr) Add(n int64) Ptr { return p + Ptr(n) }

// Stream is a CUDA stream; 0 is the legacy default stream.
type Stream uintptr

// Event is a CUDA event.
type Event uintptr

// Graph is a captured CUDA graph; GraphExec its instantiation.
type (
	Graph     uintptr
	GraphExec uintptr
)

// Func is a kernel of a loaded module.
type Func uintptr

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Thread makes CUDA calls on the device's locked OS thread. It is handed
// to the functions given to Device.Do and valid only until they return;
// its methods must not be called from other goroutines.
type Thread struct {
	drv  *driver
	dev  int32
	ctx  uintptr
	live bool

	stream Stream // the thread's default stream, non-blocking
	params uintptr
	args   Args
	rec    *recording // set on a recording Thread (no driver): Launch records
	lane   uint8      // the branch a recording Thread's launches run on
	// pdl: launches (recorded ones: at their replay) allow programmatic
	// dependent launch (every kernel opens with PDL_WAIT, common.cuh), where
	// the driver has cuLaunchKernelEx.
	pdl bool
	// pdlEarly: LaunchEarly's launches allow programmatic dependent launch
	// even where pdl is off.
	pdlEarly bool
	// pdlSmall > 0: launches of at most pdlSmall blocks allow it too.
	pdlSmall int
	// skip: launches of these kernels are dropped (BenchmarkFlash's skip-*
	// lines: what a step would take without them; the outputs are wrong).
	skip map[Func]bool
}

// Launch configuration for cuLaunchKernelEx in the thread's pinned block,
// after the parameters: CUlaunchConfig (56 bytes: grid, block, shared
// bytes as uint32s, the stream at 32, attrs at 40, numAttrs at 48), then
// one CUlaunchAttribute (72 bytes: id, then the value at 8).
const (
	launchCfgOff   = maxArgs * 16
	launchAttrOff  = launchCfgOff + 56
	launchExtBytes = 56 + 72
	// attrProgrammaticStreamSerialization is
	// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
	attrProgrammaticStreamSerialization = 6
)

// maxArgs bounds the 8-byte parameter slots of one kernel launch (a
// struct parameter takes several).
const maxArgs = 48

// Args are the parameters of one launch, written into C memory (pinned
// host memory of the thread) so that no Go pointer reaches the driver. A
// recording Thread's Args live in Go memory and are copied at replay.
type Args struct {
	vals []uint64  // 8-byte slots
	ptrs []uintptr // kernelParams: each parameter's address
	offs [maxArgs]uint8
	base uintptr // the C address of vals[0]; 0 while recording
	n    int     // parameters
	used int     // slots
}

// init allocates the thread's default stream and launch parameter block.
func (t *Thread) init() error {
	if err := t.drv.check(ccall(t.drv.cuStreamCreate, uintptr(unsafe.Pointer(&t.stream)), streamNonBlocking), "cuStreamCreate"); err != nil {
		return err
	}
	size := maxArgs*16 + launchExtBytes
	if err := t.drv.check(ccall(t.drv.cuMemAllocHost, uintptr(unsafe.Pointer(&t.params)), uintptr(size)), "cuMemAllocHost_v2(launch parameters)"); err != nil {
		return err
	}
	b := cBytes(t.params, size)
	t.args.vals = unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), maxArgs)
	t.args.ptrs = unsafe.Slice((*uintptr)(unsafe.Pointer(&b[maxArgs*8])), maxArgs)
	t.args.base = t.params
	return nil
}

// release frees what init allocated and the primary context.
func (t *Thread) release() error {
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	if t.stream != 0 {
		keep(t.drv.check(ccall(t.drv.cuStreamDestroy, uintptr(t.stream)), "cuStreamDestroy_v2"))
	}
	if t.params != 0 {
		keep(t.drv.check(ccall(t.drv.cuMemFreeHost, t.params), "cuMemFreeHost"))
	}
	keep(t.drv.check(ccall(t.drv.cuDevicePrimaryCtxRelease, uintptr(t.dev)), "cuDevicePrimaryCtxRelease_v2"))
	return first
}

func (t *Thread) ok() error {
	if !t.live {
		return errNotOnThread
	}
	return nil
}

// Stream returns the thread's default stream (non-blocking, created with
// the device).
func (t *Thread) Stream() Stream { return t.stream }

// Alloc allocates n bytes of device memory (256-byte aligned, not zeroed).
func (t *Thread) Alloc(n int64) (Ptr, error) {
	if err := t.ok(); err != nil {
		return 0, err
	}
	var p Ptr
	if n <= 0 {
		return 0, fmt.Errorf("cuda: Alloc(%d): size must be positive", n)
	}
	err := t.drv.check(ccall(t.drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)), fmt.Sprintf("cuMemAlloc_v2(%d bytes)", n))
	return p, err
}

// Free frees device memory from Alloc; Free(0) does nothing.
func (t *Thread) Free(p Ptr) error {
	if err := t.ok(); err != nil || p == 0 {
		return err
	}
	return t.drv.check(ccall(t.drv.cuMemFree, uintptr(p)), "cuMemFree_v2")
}

// MemInfo returns the device's free and total memory in bytes.
func (t *Thread) MemInfo() (free, total int64, err error) {
	if err := t.ok(); err != nil {
		return 0, 0, err
	}
	var f, tot uintptr
	err = t.drv.check(ccall(t.drv.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&tot))), "cuMemGetInfo_v2")
	return int64(f), int64(tot), err
}

// HostBuf is pinned (page-locked) host memory: copies from and to it are
// asynchronous, so it must not be reused before the copy's stream is
// synchronized.
type HostBuf struct {
	p uintptr
	n int
}

// Bytes returns the buffer's memory.
func (h HostBuf) Bytes() []byte { return cBytes(h.p, h.n) }

// AllocHost allocates n bytes of pinned host memory.
func (t *Thread) AllocHost(n int) (HostBuf, error) {
	if err := t.ok(); err != nil {
		return HostBuf{}, err
	}
	var p uintptr
	err := t.drv.check(ccall(t.drv.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(n)), fmt.Sprintf("cuMemAllocHost_v2(%d bytes)", n))
	return HostBuf{p: p, n: n}, err
}

// FreeHost frees pinned host memory.
func (t *Thread) FreeHost(h HostBuf) error {
	if err := t.ok(); err != nil || h.p == 0 {
		return err
	}
	return t.drv.check(ccall(t.drv.cuMemFreeHost, h.p), "cuMemFreeHost")
}

// CopyToDevice copies len(src) bytes to dst on stream s. From Go (pageable)
// memory the call returns once src has been staged, so src may be reused
// at once; from a HostBuf it is asynchronous.
func (t *Thread) CopyToDevice(dst Ptr, src []byte, s Stream) error {
	if err := t.ok(); err != nil || len(src) == 0 {
		return err
	}
	return t.drv.check(ccall(t.drv.cuMemcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), uintptr(s)),
		fmt.Sprintf("cuMemcpyHtoDAsync_v2(%d bytes)", len(src)))
}

// CopyFromDevice copies len(dst) bytes from src on stream s. Into Go
// (pageable) memory the call returns when the copy is complete; into a
// HostBuf it is asynchronous.
func (t *Thread) CopyFromDevice(dst []byte, src Ptr, s Stream) error {
	if err := t.ok(); err != nil || len(dst) == 0 {
		return err
	}
	return t.drv.check(ccall(t.drv.cuMemcpyDtoHAsync, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), uintptr(s)),
		fmt.Sprintf("cuMemcpyDtoHAsync_v2(%d bytes)", len(dst)))
}

// Copy copies n bytes between device buffers on stream s.
func (t *Thread) Copy(dst, src Ptr, n int64, s Stream) error {
	if err := t.ok(); err != nil || n == 0 {
		return err
	}
	return t.drv.check(ccall(t.drv.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s)),
		fmt.Sprintf("cuMemcpyDtoDAsync_v2(%d bytes)", n))
}

// Memset8 sets n bytes at p to b on stream s.
func (t *Thread) Memset8(p Ptr, b byte, n int64, s Stream) error {
	if err := t.ok(); err != nil || n == 0 {
		return err
	}
	return t.drv.check(ccall(t.drv.cuMemsetD8Async, uintptr(p), uintptr(b), uintptr(n), uintptr(s)), "cuMemsetD8Async")
}

// Memset32 sets n 32-bit words at p (4-byte aligned) to v on stream s.
func (t *Thread) Memset32(p Ptr, v uint32, n int64, s Stream) error {
	if err := t.ok(); err != nil || n == 0 {
		return err
	}
	return t.drv.check(ccall(t.drv.cuMemsetD32Async, uintptr(p), uintptr(v), uintptr(n), uintptr(s)), "cuMemsetD32Async")
}

// Bytes returns the memory of a slice of plain values (numbers), for the
// copies.
func Bytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// CUstream and CUevent flags, capture modes.
const (
	streamNonBlocking    = 1
	eventDisableTiming   = 2
	captureModeThreadLoc = 1
	funcAttrMaxDynShared = 8
)

// NewStream creates a non-blocking stream.
func (t *Thread) NewStream() (Stream, error) {
	if err := t.ok(); err != nil {
		return 0, err
	}
	var s Stream
	err := t.drv.check(ccall(t.drv.cuStreamCreate, uintptr(unsafe.Pointer(&s)), streamNonBlocking), "cuStreamCreate")
	return s, err
}

// DestroyStream destroys s once its work is done.
func (t *Thread) DestroyStream(s Stream) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuStreamDestroy, uintptr(s)), "cuStreamDestroy_v2")
}

// Sync waits for the work queued on s.
func (t *Thread) Sync(s Stream) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuStreamSynchronize, uintptr(s)), "cuStreamSynchronize")
}

// SyncAll waits for all work of the context.
func (t *Thread) SyncAll() error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuCtxSynchronize), "cuCtxSynchronize")
}

// NewEvent creates an event; timing events can be measured with Elapsed.
func (t *Thread) NewEvent(timing bool) (Event, error) {
	if err := t.ok(); err != nil {
		return 0, err
	}
	var flags uintptr
	if !timing {
		flags = eventDisableTiming
	}
	var e Event
	err := t.drv.check(ccall(t.drv.cuEventCreate, uintptr(unsafe.Pointer(&e)), flags), "cuEventCreate")
	return e, err
}

// DestroyEvent destroys e.
func (t *Thread) DestroyEvent(e Event) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuEventDestroy, uintptr(e)), "cuEventDestroy_v2")
}

// Record records e on s.
func (t *Thread) Record(e Event, s Stream) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuEventRecord, uintptr(e), uintptr(s)), "cuEventRecord")
}

// Wait makes later work on s wait for e.
func (t *Thread) Wait(s Stream, e Event) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuStreamWaitEvent, uintptr(s), uintptr(e), 0), "cuStreamWaitEvent")
}

// EventSync waits for e.
func (t *Thread) EventSync(e Event) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuEventSynchronize, uintptr(e)), "cuEventSynchronize")
}

// Elapsed returns the milliseconds between two completed timing events.
func (t *Thread) Elapsed(start, end Event) (float64, error) {
	if err := t.ok(); err != nil {
		return 0, err
	}
	var ms float32
	err := t.drv.check(ccall(t.drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end)), "cuEventElapsedTime")
	return float64(ms), err
}

// BeginCapture starts capturing the work queued on s (not the legacy
// default stream) into a graph instead of running it.
func (t *Thread) BeginCapture(s Stream) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuStreamBeginCapture, uintptr(s), captureModeThreadLoc), "cuStreamBeginCapture_v2")
}

// EndCapture ends the capture on s and returns the graph.
func (t *Thread) EndCapture(s Stream) (Graph, error) {
	if err := t.ok(); err != nil {
		return 0, err
	}
	var g Graph
	err := t.drv.check(ccall(t.drv.cuStreamEndCapture, uintptr(s), uintptr(unsafe.Pointer(&g))), "cuStreamEndCapture")
	return g, err
}

// Instantiate makes an executable graph of g.
func (t *Thread) Instantiate(g Graph) (GraphExec, error) {
	if err := t.ok(); err != nil {
		return 0, err
	}
	var ge GraphExec
	err := t.drv.check(ccall(t.drv.cuGraphInstantiateWithFlags, uintptr(unsafe.Pointer(&ge)), uintptr(g), 0), "cuGraphInstantiateWithFlags")
	return ge, err
}

// LaunchGraph queues the graph's work on s.
func (t *Thread) LaunchGraph(ge GraphExec, s Stream) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuGraphLaunch, uintptr(ge), uintptr(s)), "cuGraphLaunch")
}

// DestroyGraph destroys a graph; DestroyGraphExec an instantiation.
func (t *Thread) DestroyGraph(g Graph) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuGraphDestroy, uintptr(g)), "cuGraphDestroy")
}

// DestroyGraphExec destroys an executable graph.
func (t *Thread) DestroyGraphExec(ge GraphExec) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuGraphExecDestroy, uintptr(ge)), "cuGraphExecDestroy")
}

// Args returns the thread's parameter block, emptied, for the next Launch.
func (t *Thread) Args() *Args {
	t.args.n, t.args.used = 0, 0
	return &t.args
}

// slots returns k consecutive slots for the next parameter.
func (a *Args) slots(k int) []uint64 {
	if a.used+k > maxArgs {
		panic(fmt.Sprintf("cuda: more than %d kernel parameter slots", maxArgs))
	}
	a.offs[a.n] = uint8(a.used)
	if a.base != 0 {
		a.ptrs[a.n] = a.base + uintptr(8*a.used)
	}
	a.n++
	a.used += k
	return a.vals[a.used-k : a.used]
}

func (a *Args) slot() *uint64 { return &a.slots(1)[0] }

// Struct appends a parameter of a struct type whose bytes are words
// (little-endian, 8-byte aligned, as the kernel's struct lays them out).
func (a *Args) Struct(words ...uint64) *Args { copy(a.slots(len(words)), words); return a }

// Ptr appends a device pointer parameter.
func (a *Args) Ptr(p Ptr) *Args { *a.slot() = uint64(p); return a }

// Int appends an int (32-bit) parameter.
func (a *Args) Int(v int) *Args {
	if v != int(int32(v)) {
		panic(fmt.Sprintf("cuda: kernel parameter %d overflows int32", v))
	}
	*a.slot() = uint64(uint32(int32(v)))
	return a
}

// F32 appends a float parameter.
func (a *Args) F32(v float32) *Args { *a.slot() = uint64(math.Float32bits(v)); return a }

// Launch queues kernel f on s with the parameters in a (from t.Args()).
// On a recording Thread it appends the launch to the recording instead.
func (t *Thread) Launch(f Func, grid, block Dim3, shared int, s Stream, a *Args) error {
	return t.launch(f, grid, block, shared, s, a, t.pdl)
}

// LaunchEarly is Launch for a kernel whose loads before PDL_WAIT_LATE read
// only what no launch before it writes (gemvp's and gemv2's first weight
// chunks, hc_post_pre's mix weights): with t.pdlEarly it may start while the
// kernel before it on s finishes, its first loads in flight, where no
// other launch may.
func (t *Thread) LaunchEarly(f Func, grid, block Dim3, shared int, s Stream, a *Args) error {
	return t.launch(f, grid, block, shared, s, a, t.pdl || t.pdlEarly)
}

func (t *Thread) launch(f Func, grid, block Dim3, shared int, s Stream, a *Args, pdl bool) error {
	if err := t.ok(); err != nil {
		return err
	}
	if t.skip[f] {
		return nil
	}
	g, b := grid.norm(), block.norm()
	pdl = pdl || t.pdlSmall > 0 && g.X*g.Y*g.Z <= t.pdlSmall
	if t.rec != nil {
		rl := t.rec.launches
		n := len(rl)
		if n == 0 {
			t.rec.t0 = time.Now()
		}
		// The record in the slot a flushed recording left, its parameter
		// arrays reused (a flush leaves nothing that points into them: a
		// captured graph holds copies).
		if n < cap(rl) {
			rl = rl[:n+1]
		} else {
			rl = append(rl, launchRec{})
		}
		r := &rl[n]
		vals, offs := r.vals[:0], r.offs[:0]
		*r = launchRec{f: f, grid: g, block: b, shared: shared, pdl: pdl, lane: t.lane}
		if a != nil {
			vals = append(vals, a.vals[:a.used]...)
			offs = append(offs, a.offs[:a.n]...)
		}
		r.vals, r.offs = vals, offs
		t.rec.launches = rl
		return nil
	}
	var params uintptr
	if a != nil && a.n > 0 {
		params = t.params + maxArgs*8
	}
	var r uintptr
	if pdl && t.drv.cuLaunchKernelEx != 0 {
		c := cBytes(t.params+launchCfgOff, launchExtBytes)
		clear(c)
		for i, v := range []int{g.X, g.Y, g.Z, b.X, b.Y, b.Z, shared} {
			binary.LittleEndian.PutUint32(c[4*i:], uint32(v))
		}
		binary.LittleEndian.PutUint64(c[32:], uint64(s))
		binary.LittleEndian.PutUint64(c[40:], uint64(t.params+launchAttrOff))
		binary.LittleEndian.PutUint32(c[48:], 1)
		binary.LittleEndian.PutUint32(c[56:], attrProgrammaticStreamSerialization)
		binary.LittleEndian.PutUint32(c[56+8:], 1)
		r = ccall(t.drv.cuLaunchKernelEx, t.params+launchCfgOff, uintptr(f), params, 0)
	} else {
		r = ccall(t.drv.cuLaunchKernel, uintptr(f), uintptr(g.X), uintptr(g.Y), uintptr(g.Z),
			uintptr(b.X), uintptr(b.Y), uintptr(b.Z), uintptr(shared), uintptr(s), params, 0)
	}
	if r != 0 {
		return t.drv.check(r, fmt.Sprintf("cuLaunchKernel(grid %v, block %v, shared %d)", g, b, shared))
	}
	return nil
}

// replay launches a recorded launch on s.
func (t *Thread) replay(r *launchRec, s Stream) error {
	a := t.Args()
	copy(a.vals, r.vals)
	for i, o := range r.offs {
		a.ptrs[i] = a.base + uintptr(8*int(o))
	}
	a.n, a.used = len(r.offs), len(r.vals)
	return t.launch(r.f, r.grid, r.block, r.shared, s, a, r.pdl)
}

func (d Dim3) norm() Dim3 {
	return Dim3{max(d.X, 1), max(d.Y, 1), max(d.Z, 1)}
}

// FuncAttrs are a compiled kernel's resources (cuFuncGetAttribute).
type FuncAttrs struct {
	Regs         int // registers a thread
	LocalBytes   int // local memory a thread: register spills and stack arrays
	StaticShared int // static shared memory a block, bytes
}

// FuncAttrs returns f's resources.
func (t *Thread) FuncAttrs(f Func) (FuncAttrs, error) {
	if err := t.ok(); err != nil {
		return FuncAttrs{}, err
	}
	if t.drv.cuFuncGetAttribute == 0 {
		return FuncAttrs{}, errors.New("cuda: the driver has no cuFuncGetAttribute")
	}
	get := func(attr uintptr) (int, error) {
		var v int32
		err := t.drv.check(ccall(t.drv.cuFuncGetAttribute, uintptr(unsafe.Pointer(&v)), attr, uintptr(f)), "cuFuncGetAttribute")
		return int(v), err
	}
	var a FuncAttrs
	var err error
	if a.Regs, err = get(4); err != nil { // CU_FUNC_ATTRIBUTE_NUM_REGS
		return a, err
	}
	if a.LocalBytes, err = get(3); err != nil { // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
		return a, err
	}
	a.StaticShared, err = get(1) // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	return a, err
}

// ResidentBlocks returns how many blocks of f (block threads, shared
// bytes of dynamic shared memory each) one SM holds at once
// (cuOccupancyMaxActiveBlocksPerMultiprocessor).
func (t *Thread) ResidentBlocks(f Func, block, shared int) (int, error) {
	if err := t.ok(); err != nil {
		return 0, err
	}
	if t.drv.cuOccupancy == 0 {
		return 0, errors.New("cuda: the driver has no cuOccupancyMaxActiveBlocksPerMultiprocessor")
	}
	var n int32
	err := t.drv.check(ccall(t.drv.cuOccupancy, uintptr(unsafe.Pointer(&n)), uintptr(f), uintptr(block), uintptr(shared)),
		"cuOccupancyMaxActiveBlocksPerMultiprocessor")
	return int(n), err
}

// SetMaxDynamicShared lets f use up to n bytes of dynamic shared memory
// (needed above 48 KiB).
func (t *Thread) SetMaxDynamicShared(f Func, n int) error {
	if err := t.ok(); err != nil {
		return err
	}
	return t.drv.check(ccall(t.drv.cuFuncSetAttribute, uintptr(f), funcAttrMaxDynShared, uintptr(n)), "cuFuncSetAttribute")
}
