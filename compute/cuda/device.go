package cuda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Options configure [Open].
type Options struct {
	// Ordinal is the device's index among the driver's devices.
	Ordinal int
	// LibDir, if set, is searched first for libcuda.so.1 and libnvrtc.so*;
	// empty means $STRATA_CUDA_LIB_DIR.
	LibDir string
	// CacheDir holds compiled kernels; empty means
	// os.UserCacheDir()/strata/cuda, "off" disables the cache.
	CacheDir string
	// Logger receives start-up information; nil means slog.Default().
	Logger *slog.Logger

	// keepGoing (tests only) opens the device even when some kernel
	// sources fail to build; their kernels then fail at launch.
	keepGoing bool
}

// Props describes a device.
type Props struct {
	Name                 string
	Major, Minor         int // compute capability
	SMs                  int
	L2Bytes              int
	SharedPerBlockOptin  int // bytes of shared memory a block may opt in to
	SharedPerSM          int
	MemBytes             int64
	ClockKHz             int // 0 where the driver no longer reports it
	MemClockKHz, BusBits int
	DriverVersion        int // e.g. 13000 for CUDA 13.0
	DriverPath           string
	NVRTCPath            string
	NVRTCVersion         string
	Arch                 string // the NVRTC target, e.g. sm_90a
}

// Device is one GPU with its primary context, the goroutine (locked to
// its OS thread) that makes every CUDA call for it, and the compiled
// kernels. Its methods are safe for concurrent use; the functions given
// to Do run one at a time.
type Device struct {
	props   Props
	mu      sync.Mutex           // serializes Do callers
	pending atomic.Pointer[call] // the call handed to the device goroutine
	parked  atomic.Bool          // the device goroutine sleeps on wake
	wake    chan struct{}        // capacity 1
	quit    chan struct{}
	stopped chan struct{}
	once    sync.Once
	kern    *Kernels
	log     *slog.Logger
	// spin holds the spin budgets in nanoseconds: [0] the device
	// goroutine's after a call, [1] a caller's (deviceSpin and callerSpin
	// at Open; BenchmarkFlash's spin-short A/B changes them).
	spin [2]atomic.Int64
}

// call is one Do: the device goroutine runs fn, stores err, then sets done
// (and signals ch if the caller went to sleep).
type call struct {
	fn      func(*Thread) error
	err     error
	done    atomic.Bool
	waiting atomic.Bool
	ch      chan struct{} // capacity 1
}

// Spin budgets of the hand-off between a caller and the device goroutine.
// Waking a sleeping goroutine that is locked to its thread takes tens of
// microseconds (a futex wake-up of another OS thread, both ways), so each
// side polls before it sleeps: calls in quick succession (a decode loop)
// then cost about a microsecond each. The budgets cover a small batch's
// whole decode step and the host's work between two steps: run 13
// measured 100 and 50 us (the budgets before) 4.2% / 1.4% / 0.3% slower
// at batches 1 / 8 / 64 than 5 ms each (A/B spin-long). The price is up
// to a core on each side while a decode loop runs.
const (
	deviceSpin = 5 * time.Millisecond // the device goroutine, after a call
	callerSpin = 5 * time.Millisecond // a caller, waiting for its call
)

// Open initializes the driver, retains device opts.Ordinal's primary
// context on a new locked goroutine, and compiles (or loads from the
// cache) the kernels. Without a usable driver the error wraps ErrNoDriver.
func Open(ctx context.Context, opts Options) (*Device, error) {
	if opts.LibDir == "" {
		opts.LibDir = os.Getenv(LibDirEnv)
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	env := osSearchEnv()
	drv, err := loadDriver(opts.LibDir, env)
	if err != nil {
		return nil, err
	}
	d := &Device{wake: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{}), log: log}
	d.setSpin(deviceSpin, callerSpin)
	ready := make(chan error, 1)
	go d.loop(func() (*Thread, error) { return newThread(drv, opts.Ordinal, &d.props) }, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	d.props.DriverPath = drv.path

	nv, err := loadNVRTC(opts.LibDir, env)
	if err != nil {
		d.Close()
		return nil, err
	}
	d.props.NVRTCPath = nv.path
	d.props.NVRTCVersion = fmt.Sprintf("%d.%d", nv.major, nv.minor)
	d.props.Arch = archFor(d.props.Major, d.props.Minor)
	units, err := buildKernels(nv, d.props.Arch, opts.CacheDir, log)
	if err != nil {
		d.Close()
		return nil, err
	}
	cached := 0
	var buildErrs []error
	for _, u := range units {
		if u.err != nil {
			buildErrs = append(buildErrs, u.err)
		}
		if u.cached {
			cached++
		}
	}
	if len(buildErrs) > 0 && !opts.keepGoing {
		d.Close()
		return nil, errors.Join(buildErrs...)
	}
	err = d.Do(ctx, func(t *Thread) error {
		k, err := loadKernels(t, units, d.props.Major >= 8, d.props.SMs, opts.keepGoing)
		if k != nil {
			k.sharedPerSM = d.props.SharedPerSM
			k.fp8MMA = d.props.Arch == "sm_90a" // wgmma: Hopper only
		}
		d.kern = k
		return err
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	log.Info("cuda: device open", "name", d.props.Name, "cc", fmt.Sprintf("%d.%d", d.props.Major, d.props.Minor),
		"sms", d.props.SMs, "mem_gib", d.props.MemBytes>>30, "driver", d.props.DriverVersion,
		"nvrtc", d.props.NVRTCVersion, "arch", d.props.Arch, "kernel_units", len(units), "cached", cached)
	return d, nil
}

// archFor returns the NVRTC architecture for compute capability
// major.minor: the arch-specific target (sm_90a) on Hopper, whose
// instructions the kernels may use, the plain one elsewhere.
func archFor(major, minor int) string {
	if major == 9 && minor == 0 {
		return "sm_90a"
	}
	return fmt.Sprintf("sm_%d%d", major, minor)
}

// Props returns the device's properties.
func (d *Device) Props() Props { return d.props }

// Kernels returns the device's compiled kernels.
func (d *Device) Kernels() *Kernels { return d.kern }

// Do runs fn on the device's thread, with a Thread valid until fn
// returns, and returns fn's error. Calls run one at a time; a ctx already
// done returns ctx.Err() and fn does not run (a call handed over runs to
// completion: CUDA calls cannot be interrupted). fn must not call Do (it would wait for itself). A
// panic in fn is returned as an error and leaves the device usable.
func (d *Device) Do(ctx context.Context, fn func(*Thread) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.quit:
		return ErrClosed
	default:
	}
	c := &call{fn: fn, ch: make(chan struct{}, 1)}
	d.pending.Store(c)
	if d.parked.Load() {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	// Poll for the result, then sleep until the device goroutine signals.
	start := time.Now()
	for i := 0; !c.done.Load(); i++ {
		if i%64 == 63 {
			if time.Since(start) > time.Duration(d.spin[1].Load()) {
				c.waiting.Store(true)
				if !c.done.Load() {
					<-c.ch
				}
				break
			}
			runtime.Gosched()
		}
	}
	return c.err
}

// Close releases the kernels, the thread's resources and the primary
// context, and stops the device's goroutine. Buffers still allocated are
// freed with the context.
func (d *Device) Close() error {
	var err error
	d.once.Do(func() {
		err = d.Do(context.Background(), func(t *Thread) error {
			if d.kern != nil {
				d.kern.unload(t)
			}
			if t.drv == nil { // a test's thread without a driver
				return nil
			}
			return t.release()
		})
		d.mu.Lock() // no Do is in flight when quit closes
		close(d.quit)
		d.mu.Unlock()
		<-d.stopped
	})
	return err
}

// setSpin sets the spin budgets of the device goroutine and of callers.
func (d *Device) setSpin(device, caller time.Duration) {
	d.spin[0].Store(int64(device))
	d.spin[1].Store(int64(caller))
}

// loop is the device's goroutine: it locks its OS thread for good (the
// thread ends with it), makes the primary context current, reports
// through ready, then runs calls until quit, polling for the next one for
// deviceSpin before it sleeps.
func (d *Device) loop(start func() (*Thread, error), ready chan<- error) {
	runtime.LockOSThread()
	defer close(d.stopped)
	t, err := start()
	ready <- err
	if err != nil {
		return
	}
	last := time.Now()
	for i := 0; ; i++ {
		if c := d.pending.Swap(nil); c != nil {
			c.err = t.run(c.fn)
			c.done.Store(true)
			if c.waiting.Load() {
				c.ch <- struct{}{}
			}
			last, i = time.Now(), 0
			continue
		}
		if i%64 != 63 {
			continue
		}
		select {
		case <-d.quit:
			return
		default:
		}
		if time.Since(last) < time.Duration(d.spin[0].Load()) {
			runtime.Gosched()
			continue
		}
		// Sleep. A caller that stored its call before seeing parked is
		// found by the second look; one after it sends a wake-up.
		d.parked.Store(true)
		if d.pending.Load() == nil {
			select {
			case <-d.wake:
			case <-d.quit:
				d.parked.Store(false)
				return
			}
		}
		d.parked.Store(false)
		last = time.Now()
	}
}

// run calls fn with t marked valid, turning a panic into an error.
func (t *Thread) run(fn func(*Thread) error) (err error) {
	t.live = true
	defer func() {
		t.live = false
		if p := recover(); p != nil {
			err = fmt.Errorf("cuda: panic on the device thread: %v", p)
		}
	}()
	return fn(t)
}

// newThread initializes the driver on the calling (locked) thread, makes
// the device's primary context current and reads its properties.
func newThread(drv *driver, ordinal int, p *Props) (*Thread, error) {
	if err := drv.check(ccall(drv.cuInit, 0), "cuInit"); err != nil {
		return nil, fmt.Errorf("%w (libcuda.so.1 at %s): %v", ErrNoDriver, drv.path, err)
	}
	var n, ver int32
	if err := drv.check(ccall(drv.cuDriverGetVersion, uintptr(unsafe.Pointer(&ver))), "cuDriverGetVersion"); err != nil {
		return nil, err
	}
	p.DriverVersion = int(ver)
	if err := drv.check(ccall(drv.cuDeviceGetCount, uintptr(unsafe.Pointer(&n))), "cuDeviceGetCount"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDriver, err)
	}
	if ordinal < 0 || ordinal >= int(n) {
		return nil, fmt.Errorf("%w: device %d requested, %d present", ErrNoDriver, ordinal, n)
	}
	var dev int32
	if err := drv.check(ccall(drv.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal)), "cuDeviceGet"); err != nil {
		return nil, err
	}
	t := &Thread{drv: drv, dev: dev}
	if err := drv.check(ccall(drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&t.ctx)), uintptr(dev)), "cuDevicePrimaryCtxRetain"); err != nil {
		return nil, err
	}
	if err := drv.check(ccall(drv.cuCtxSetCurrent, t.ctx), "cuCtxSetCurrent"); err != nil {
		return nil, err
	}
	var name [256]byte
	if err := drv.check(ccall(drv.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(dev)), "cuDeviceGetName"); err != nil {
		return nil, err
	}
	for i, b := range name {
		if b == 0 {
			p.Name = string(name[:i])
			break
		}
	}
	attr := func(a int) int {
		var v int32
		if drv.check(ccall(drv.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(dev)), "cuDeviceGetAttribute") != nil {
			return 0
		}
		return int(v)
	}
	p.Major, p.Minor = attr(attrCCMajor), attr(attrCCMinor)
	p.SMs = attr(attrSMCount)
	p.L2Bytes = attr(attrL2Size)
	p.SharedPerBlockOptin = attr(attrSharedOptin)
	p.SharedPerSM = attr(attrSharedPerSM)
	p.ClockKHz = attr(attrClockRate)
	p.MemClockKHz = attr(attrMemClockRate)
	p.BusBits = attr(attrBusWidth)
	var mem uintptr
	if err := drv.check(ccall(drv.cuDeviceTotalMem, uintptr(unsafe.Pointer(&mem)), uintptr(dev)), "cuDeviceTotalMem_v2"); err != nil {
		return nil, err
	}
	p.MemBytes = int64(mem)
	if err := t.init(); err != nil {
		return nil, err
	}
	return t, nil
}

// CUdevice_attribute values.
const (
	attrClockRate    = 13
	attrSMCount      = 16
	attrMemClockRate = 36
	attrBusWidth     = 37
	attrL2Size       = 38
	attrCCMajor      = 75
	attrCCMinor      = 76
	attrSharedPerSM  = 81
	attrSharedOptin  = 97
)
