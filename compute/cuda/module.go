package cuda

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// kernelUnits returns the headers (*.cuh) and one translation unit per
// *.cu file, in name order: the file after the common header and a #line
// directive, so that compiler messages name the file.
func kernelUnits() (units, headers []source, err error) {
	entries, err := fs.ReadDir(kernelFS, "kernels")
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	var includes strings.Builder
	for _, n := range names {
		if strings.HasSuffix(n, ".cuh") {
			text, err := kernelFS.ReadFile("kernels/" + n)
			if err != nil {
				return nil, nil, err
			}
			headers = append(headers, source{name: n, text: string(text)})
			fmt.Fprintf(&includes, "#include \"%s\"\n", n)
		}
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".cu") {
			text, err := kernelFS.ReadFile("kernels/" + n)
			if err != nil {
				return nil, nil, err
			}
			units = append(units, source{name: n, text: fmt.Sprintf("%s#line 1 \"%s\"\n%s", includes.String(), n, text)})
		}
	}
	return units, headers, nil
}

// nvrtcOptions are the compiler options for arch. Denormals are kept
// (the exact decoders rely on them), divisions and square roots are
// correctly rounded, and contraction is left on: the kernels spell out
// the fused multiply-adds where the order matters.
func nvrtcOptions(arch string) []string {
	return []string{
		"--gpu-architecture=" + arch, "--std=c++17", "-default-device",
		"--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--fmad=true", "-lineinfo",
	}
}

// built is the outcome of compiling one translation unit.
type built struct {
	unit   string
	cubin  []byte
	cached bool
	err    error
}

// buildKernels returns the cubin of each kernel source for arch, from the
// cache when it holds one for that source, its headers, this arch, the
// options and the NVRTC version, else compiled by NVRTC (the sources in
// parallel) and stored.
func buildKernels(nv *nvrtc, arch, cacheDir string, log *slog.Logger) ([]built, error) {
	units, headers, err := kernelUnits()
	if err != nil {
		return nil, fmt.Errorf("cuda: reading embedded kernels: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	if cacheDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cacheDir = filepath.Join(d, "strata", "cuda")
		}
	}
	opts := nvrtcOptions(arch)
	out := make([]built, len(units))
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Go(func() {
			out[i] = buildUnit(nv, u, headers, opts, cacheDir, log)
		})
	}
	wg.Wait()
	return out, nil
}

func buildUnit(nv *nvrtc, u source, headers []source, opts []string, cacheDir string, log *slog.Logger) built {
	h := sha256.New()
	fmt.Fprintf(h, "strata-cuda-kernels 1\x00nvrtc %d.%d\x00%s\x00", nv.major, nv.minor, strings.Join(opts, " "))
	for _, s := range append([]source{u}, headers...) {
		fmt.Fprintf(h, "%s\x00%d\x00%s", s.name, len(s.text), s.text)
	}
	path := ""
	if cacheDir != "" && cacheDir != "off" {
		path = filepath.Join(cacheDir, strings.TrimSuffix(u.name, ".cu")+"-"+hex.EncodeToString(h.Sum(nil))[:32]+".cubin")
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return built{unit: u.name, cubin: b, cached: true}
		}
	}
	cubin, err := nv.compile(u, headers, opts)
	if err != nil {
		return built{unit: u.name, err: err}
	}
	if path != "" {
		if err := writeAtomic(path, cubin); err != nil {
			log.Warn("cuda: cannot cache compiled kernels", "path", path, "err", err)
		}
	}
	return built{unit: u.name, cubin: cubin}
}

// writeAtomic writes b to path through a temporary file and a rename, so
// that a concurrent reader never sees a partial cubin.
func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".cubin-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// module is a loaded cubin.
type module struct{ h uintptr }

func (t *Thread) loadModule(image []byte) (module, error) {
	// cuModuleLoadData reads the image during the call only.
	var m module
	err := t.drv.check(ccall(t.drv.cuModuleLoadData, uintptr(unsafe.Pointer(&m.h)), uintptr(unsafe.Pointer(&image[0]))), "cuModuleLoadData")
	return m, err
}

func (t *Thread) function(m module, name string) (Func, error) {
	var f Func
	n := cstr(name)
	err := t.drv.check(ccall(t.drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), m.h, uintptr(unsafe.Pointer(&n[0]))), "cuModuleGetFunction("+name+")")
	return f, err
}

func (t *Thread) unloadModule(m module) error {
	return t.drv.check(ccall(t.drv.cuModuleUnload, m.h), "cuModuleUnload")
}
