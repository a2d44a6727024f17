package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"unsafe"
)

// nvrtc holds the entry points of the NVRTC library.
type nvrtc struct {
	path         string
	major, minor int

	nvrtcGetErrorString, nvrtcVersion, nvrtcCreateProgram, nvrtcDestroyProgram uintptr
	nvrtcCompileProgram, nvrtcGetProgramLogSize, nvrtcGetProgramLog            uintptr
	nvrtcGetCUBINSize, nvrtcGetCUBIN                                           uintptr
}

// loadNVRTC loads the first NVRTC library among the candidates that loads
// and resolves its entry points.
func loadNVRTC(override string, env searchEnv) (*nvrtc, error) {
	cands := nvrtcCandidates(override, env)
	var errs []string
	for _, path := range cands {
		for _, b := range builtinsFor(path, env) {
			if _, err := dlopen(b); err == nil {
				break
			}
		}
		h, err := dlopen(path)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		n := &nvrtc{path: path}
		var missing []string
		sym := func(p *uintptr, name string) {
			f, err := dlsym(h, name)
			if err != nil || f == 0 {
				missing = append(missing, name)
			}
			*p = f
		}
		sym(&n.nvrtcGetErrorString, "nvrtcGetErrorString")
		sym(&n.nvrtcVersion, "nvrtcVersion")
		sym(&n.nvrtcCreateProgram, "nvrtcCreateProgram")
		sym(&n.nvrtcDestroyProgram, "nvrtcDestroyProgram")
		sym(&n.nvrtcCompileProgram, "nvrtcCompileProgram")
		sym(&n.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")
		sym(&n.nvrtcGetProgramLog, "nvrtcGetProgramLog")
		sym(&n.nvrtcGetCUBINSize, "nvrtcGetCUBINSize")
		sym(&n.nvrtcGetCUBIN, "nvrtcGetCUBIN")
		if len(missing) > 0 {
			errs = append(errs, fmt.Sprintf("%s: missing %v", path, missing))
			continue
		}
		var major, minor int32
		if err := n.check(ccall(n.nvrtcVersion, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor))), "nvrtcVersion"); err != nil {
			return nil, err
		}
		n.major, n.minor = int(major), int(minor)
		return n, nil
	}
	if len(errs) > 3 {
		errs = append(errs[:3], fmt.Sprintf("and %d more", len(errs)-3))
	}
	return nil, fmt.Errorf("cuda: no NVRTC library (libnvrtc.so*; install the CUDA toolkit or the nvidia-cuda-nvrtc wheel, or set %s): %s",
		LibDirEnv, strings.Join(errs, "; "))
}

func (n *nvrtc) check(r uintptr, call string) error {
	code := int(int32(uint32(r)))
	if code == 0 {
		return nil
	}
	msg := cString(ccall(n.nvrtcGetErrorString, uintptr(uint32(code))))
	return &Error{Call: call, Code: code, Name: msg, Msg: "NVRTC"}
}

// source is one file of a program: its name, for #include and messages,
// and its text.
type source struct{ name, text string }

// compile compiles the main source with the given headers and options to
// a cubin. A failed compilation's error holds the compiler's log.
func (n *nvrtc) compile(main source, headers []source, opts []string) ([]byte, error) {
	// Every C string and pointer array stays referenced by these slices
	// until the calls that read them return.
	src, name := cstr(main.text), cstr(main.name)
	hText := make([][]byte, len(headers))
	hName := make([][]byte, len(headers))
	hTextP := make([]uintptr, len(headers)+1)
	hNameP := make([]uintptr, len(headers)+1)
	for i, h := range headers {
		hText[i], hName[i] = cstr(h.text), cstr(h.name)
		hTextP[i] = uintptr(unsafe.Pointer(&hText[i][0]))
		hNameP[i] = uintptr(unsafe.Pointer(&hName[i][0]))
	}
	var prog uintptr
	err := n.check(ccall(n.nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&src[0])), uintptr(unsafe.Pointer(&name[0])),
		uintptr(len(headers)), uintptr(unsafe.Pointer(&hTextP[0])), uintptr(unsafe.Pointer(&hNameP[0]))),
		"nvrtcCreateProgram")
	runtime.KeepAlive(hText)
	runtime.KeepAlive(hName)
	runtime.KeepAlive(src)
	runtime.KeepAlive(name)
	if err != nil {
		return nil, err
	}
	defer ccall(n.nvrtcDestroyProgram, uintptr(unsafe.Pointer(&prog)))

	o := make([][]byte, len(opts))
	op := make([]uintptr, len(opts)+1)
	for i, s := range opts {
		o[i] = cstr(s)
		op[i] = uintptr(unsafe.Pointer(&o[i][0]))
	}
	cerr := n.check(ccall(n.nvrtcCompileProgram, prog, uintptr(len(opts)), uintptr(unsafe.Pointer(&op[0]))), "nvrtcCompileProgram")
	runtime.KeepAlive(o)
	var logSize uintptr
	var log string
	if ccall(n.nvrtcGetProgramLogSize, prog, uintptr(unsafe.Pointer(&logSize))) == 0 && logSize > 1 {
		buf := make([]byte, logSize)
		if ccall(n.nvrtcGetProgramLog, prog, uintptr(unsafe.Pointer(&buf[0]))) == 0 {
			log = strings.TrimRight(string(buf), "\x00\n ")
		}
	}
	if cerr != nil {
		return nil, fmt.Errorf("cuda: compiling kernels (%s) with %s: %w\n%s", main.name, n.path, cerr, log)
	}
	var size uintptr
	if err := n.check(ccall(n.nvrtcGetCUBINSize, prog, uintptr(unsafe.Pointer(&size))), "nvrtcGetCUBINSize"); err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, errors.New("cuda: NVRTC produced no cubin (is the architecture a real sm_XX?)")
	}
	cubin := make([]byte, size)
	if err := n.check(ccall(n.nvrtcGetCUBIN, prog, uintptr(unsafe.Pointer(&cubin[0]))), "nvrtcGetCUBIN"); err != nil {
		return nil, err
	}
	return cubin, nil
}
