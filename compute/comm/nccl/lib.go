package nccl

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// LibDirEnv names the environment variable that, when set, is the first
// directory searched for libnccl.so.2.
const LibDirEnv = "STRATA_NCCL_LIB_DIR"

// ErrNoNCCL is wrapped by Load's error when no usable libnccl.so.2 is found.
var ErrNoNCCL = errors.New("nccl: no NCCL library")

// Error is a failed NCCL call.
type Error struct {
	Call string // the function and, where useful, its arguments
	Code int    // ncclResult_t
	Msg  string // ncclGetErrorString's description
}

func (e *Error) Error() string {
	return fmt.Sprintf("nccl: %s: %s (%d): %s", e.Call, resultName(e.Code), e.Code, e.Msg)
}

// resultName names an ncclResult_t.
func resultName(code int) string {
	names := []string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
		"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"}
	if code >= 0 && code < len(names) {
		return names[code]
	}
	return "ncclUnknownResult"
}

// dataType is ncclDataType_t.
type dataType int

const (
	ncclUint8   dataType = 1
	ncclInt32   dataType = 2
	ncclFloat32 dataType = 7
)

// redOp is ncclRedOp_t.
type redOp int

const (
	ncclSum redOp = 0
	ncclMax redOp = 2
	ncclMin redOp = 3
)

// minVersion is the oldest NCCL with ncclSend and ncclRecv (2.7.0).
const minVersion = 20700

// api is the part of NCCL's C API the communicator calls: the library's
// entry points, or a scripted stand-in in tests.
type api interface {
	version() (int, error)
	commInitAll(devs []int32) ([]uintptr, error)
	commDestroy(comm uintptr) error
	commAbort(comm uintptr) error
	commAsyncError(comm uintptr) error
	allReduce(send, recv uintptr, count int, dt dataType, op redOp, comm, stream uintptr) error
	allGather(send, recv uintptr, count int, dt dataType, comm, stream uintptr) error
	send(buf uintptr, count int, dt dataType, peer int, comm, stream uintptr) error
	recv(buf uintptr, count int, dt dataType, peer int, comm, stream uintptr) error
	groupStart() error
	groupEnd() error
}

// Library is a loaded libnccl.so.2.
type Library struct {
	Path    string
	Version int // NCCL_VERSION_CODE: major·10000 + minor·100 + patch
	api     api
}

// entries are the library's entry points.
type entries struct {
	ncclGetVersion, ncclGetErrorString, ncclCommInitAll, ncclCommDestroy uintptr
	ncclCommAbort, ncclCommGetAsyncError, ncclAllReduce, ncclAllGather   uintptr
	ncclSend, ncclRecv, ncclGroupStart, ncclGroupEnd                     uintptr
}

func (e *entries) resolve(h uintptr) error {
	var missing []string
	sym := func(p *uintptr, name string) {
		f, err := dlsym(h, name)
		if err != nil || f == 0 {
			missing = append(missing, name)
		}
		*p = f
	}
	sym(&e.ncclGetVersion, "ncclGetVersion")
	sym(&e.ncclGetErrorString, "ncclGetErrorString")
	sym(&e.ncclCommInitAll, "ncclCommInitAll")
	sym(&e.ncclCommDestroy, "ncclCommDestroy")
	sym(&e.ncclCommAbort, "ncclCommAbort")
	sym(&e.ncclCommGetAsyncError, "ncclCommGetAsyncError")
	sym(&e.ncclAllReduce, "ncclAllReduce")
	sym(&e.ncclAllGather, "ncclAllGather")
	sym(&e.ncclSend, "ncclSend")
	sym(&e.ncclRecv, "ncclRecv")
	sym(&e.ncclGroupStart, "ncclGroupStart")
	sym(&e.ncclGroupEnd, "ncclGroupEnd")
	if len(missing) > 0 {
		return fmt.Errorf("missing entry points %v", missing)
	}
	return nil
}

// check turns an ncclResult_t into nil or an *Error.
func (e *entries) check(r uintptr, call string) error {
	code := int(int32(uint32(r)))
	if code == 0 {
		return nil
	}
	return &Error{Call: call, Code: code, Msg: cString(ccall(e.ncclGetErrorString, uintptr(uint32(code))))}
}

func (e *entries) version() (int, error) {
	var v int32
	err := e.check(ccall(e.ncclGetVersion, uintptr(unsafe.Pointer(&v))), "ncclGetVersion")
	return int(v), err
}

func (e *entries) commInitAll(devs []int32) ([]uintptr, error) {
	comms := make([]uintptr, len(devs))
	err := e.check(ccall(e.ncclCommInitAll, uintptr(unsafe.Pointer(&comms[0])), uintptr(len(devs)), uintptr(unsafe.Pointer(&devs[0]))),
		fmt.Sprintf("ncclCommInitAll(%d devices %v)", len(devs), devs))
	return comms, err
}

func (e *entries) commDestroy(c uintptr) error {
	return e.check(ccall(e.ncclCommDestroy, c), "ncclCommDestroy")
}

func (e *entries) commAbort(c uintptr) error {
	return e.check(ccall(e.ncclCommAbort, c), "ncclCommAbort")
}

func (e *entries) commAsyncError(c uintptr) error {
	var r int32
	if err := e.check(ccall(e.ncclCommGetAsyncError, c, uintptr(unsafe.Pointer(&r))), "ncclCommGetAsyncError"); err != nil {
		return err
	}
	return e.check(uintptr(uint32(r)), "an earlier NCCL operation (asynchronous error)")
}

func (e *entries) allReduce(send, recv uintptr, count int, dt dataType, op redOp, c, s uintptr) error {
	return e.check(ccall(e.ncclAllReduce, send, recv, uintptr(count), uintptr(dt), uintptr(op), c, s), fmt.Sprintf("ncclAllReduce(%d elements)", count))
}

func (e *entries) allGather(send, recv uintptr, count int, dt dataType, c, s uintptr) error {
	return e.check(ccall(e.ncclAllGather, send, recv, uintptr(count), uintptr(dt), c, s), fmt.Sprintf("ncclAllGather(%d elements)", count))
}

func (e *entries) send(buf uintptr, count int, dt dataType, peer int, c, s uintptr) error {
	return e.check(ccall(e.ncclSend, buf, uintptr(count), uintptr(dt), uintptr(peer), c, s), fmt.Sprintf("ncclSend(%d elements to rank %d)", count, peer))
}

func (e *entries) recv(buf uintptr, count int, dt dataType, peer int, c, s uintptr) error {
	return e.check(ccall(e.ncclRecv, buf, uintptr(count), uintptr(dt), uintptr(peer), c, s), fmt.Sprintf("ncclRecv(%d elements from rank %d)", count, peer))
}

func (e *entries) groupStart() error { return e.check(ccall(e.ncclGroupStart), "ncclGroupStart") }

func (e *entries) groupEnd() error { return e.check(ccall(e.ncclGroupEnd), "ncclGroupEnd") }

// Load finds and loads libnccl.so.2, after making sure NVLink multicast
// stays off (see the package doc). Without a usable library the error
// wraps ErrNoNCCL and says where it looked.
func Load() (*Library, error) {
	if err := keepNVLSOff(osEnv{}); err != nil {
		return nil, err
	}
	return loadFrom(candidates(os.Getenv(LibDirEnv), osSearchEnv()))
}

// loadFrom loads the first candidate that opens and checks it is NCCL of
// a version with point-to-point calls.
func loadFrom(paths []string) (*Library, error) {
	if !dynamicLoading {
		_, err := dlopen("libnccl.so.2")
		return nil, fmt.Errorf("%w (libnccl.so.2): %v", ErrNoNCCL, err)
	}
	var errs []string
	for _, p := range paths {
		h, err := dlopen(p)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		e := &entries{}
		if err := e.resolve(h); err != nil {
			return nil, fmt.Errorf("%w (libnccl.so.2 at %s): %v", ErrNoNCCL, p, err)
		}
		v, err := e.version()
		if err != nil {
			return nil, fmt.Errorf("%w (libnccl.so.2 at %s): %v", ErrNoNCCL, p, err)
		}
		if normalizeVersion(v) < minVersion {
			return nil, fmt.Errorf("%w (libnccl.so.2 at %s): version %s; point-to-point calls need 2.7 or later", ErrNoNCCL, p, versionString(v))
		}
		return &Library{Path: p, Version: normalizeVersion(v), api: e}, nil
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w (libnccl.so.2): nowhere to look", ErrNoNCCL)
	}
	return nil, fmt.Errorf("%w (libnccl.so.2): tried %d places (set %s to its directory); first: %s", ErrNoNCCL, len(paths), LibDirEnv, errs[0])
}

// normalizeVersion turns NCCL's version code into major·10000 +
// minor·100 + patch (releases before 2.9 encoded major·1000 + minor·100 +
// patch).
func normalizeVersion(v int) int {
	if v < 10000 {
		return v/1000*10000 + v%1000
	}
	return v
}

func versionString(v int) string {
	v = normalizeVersion(v)
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
}

// searchEnv is what the library search reads from the system, so that
// tests can give it another.
type searchEnv struct {
	getenv func(string) string
	glob   func(string) ([]string, error)
	home   string
}

func osSearchEnv() searchEnv {
	home, _ := os.UserHomeDir()
	return searchEnv{getenv: os.Getenv, glob: filepath.Glob, home: home}
}

// candidates returns the libnccl.so.2 paths to try, in order: the override
// directory, LD_LIBRARY_PATH, the loader's own search (bare soname), the
// CUDA toolkits (newest first), the system library directories, and the
// Python wheels (site-packages/nvidia/nccl/lib, as nvidia-nccl-cu12
// installs it).
func candidates(override string, env searchEnv) []string {
	const name = "libnccl.so.2"
	var dirs []string
	if override != "" {
		dirs = append(dirs, override)
	}
	for _, d := range strings.Split(env.getenv("LD_LIBRARY_PATH"), ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	var c []string
	for _, d := range dirs {
		c = append(c, filepath.Join(d, name))
	}
	c = append(c, name)
	dirs = dirs[:0]
	for _, v := range []string{"CUDA_PATH", "CUDA_HOME"} {
		if p := env.getenv(v); p != "" {
			dirs = append(dirs, filepath.Join(p, "lib64"), filepath.Join(p, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	toolkits, _ := env.glob("/usr/local/cuda-*/lib64")
	slices.SortFunc(toolkits, func(a, b string) int { return compareVersions(b, a) })
	dirs = append(dirs, toolkits...)
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
	var sites []string
	if v := env.getenv("VIRTUAL_ENV"); v != "" {
		sites = append(sites, filepath.Join(v, "lib/python3*/site-packages"))
	}
	if env.home != "" {
		sites = append(sites, filepath.Join(env.home, ".local/lib/python3*/site-packages"))
	}
	sites = append(sites, "/opt/*/.venv/lib/python3*/site-packages", "/opt/*/lib/python3*/site-packages",
		"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages", "/usr/lib/python3/dist-packages")
	for _, s := range sites {
		libs, _ := env.glob(filepath.Join(s, "nvidia/nccl/lib"))
		slices.Sort(libs)
		dirs = append(dirs, libs...)
	}
	seen := map[string]bool{}
	for _, p := range c {
		seen[p] = true
	}
	for _, d := range dirs {
		if p := filepath.Join(d, name); !seen[p] {
			seen[p] = true
			c = append(c, p)
		}
	}
	return c
}

// compareVersions orders toolkit paths by the numbers in their directory
// (cuda-13.0 > cuda-12.9).
func compareVersions(a, b string) int {
	va, vb := numbers(filepath.Base(filepath.Dir(a))), numbers(filepath.Base(filepath.Dir(b)))
	for i := range min(len(va), len(vb)) {
		if c := cmp.Compare(va[i], vb[i]); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(len(va), len(vb)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func numbers(s string) []int {
	var v []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		if n, err := strconv.Atoi(f); err == nil {
			v = append(v, n)
		}
	}
	return v
}
