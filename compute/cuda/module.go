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
	"unsafe"
)

//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// kernelSources returns the headers (*.cuh) and the main translation unit:
// every *.cu file, in name order, each introduced by a #line directive so
// that compiler messages name the file.
func kernelSources() (main source, headers []source, err error) {
	entries, err := fs.ReadDir(kernelFS, "kernels")
	if err != nil {
		return source{}, nil, err
	}
	var b strings.Builder
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	for _, n := range names {
		text, err := kernelFS.ReadFile("kernels/" + n)
		if err != nil {
			return source{}, nil, err
		}
		switch {
		case strings.HasSuffix(n, ".cuh"):
			headers = append(headers, source{name: n, text: string(text)})
			fmt.Fprintf(&b, "#include \"%s\"\n", n)
		}
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".cu") {
			text, _ := kernelFS.ReadFile("kernels/" + n)
			fmt.Fprintf(&b, "#line 1 \"%s\"\n%s\n", n, text)
		}
	}
	return source{name: "strata_kernels.cu", text: b.String()}, headers, nil
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

// buildKernels returns the cubin of the kernels for arch, from the cache
// when it holds one for these sources, this arch, options and NVRTC
// version, else compiled by NVRTC (and stored). cached reports a hit.
func buildKernels(nv *nvrtc, arch, cacheDir string, log *slog.Logger) (cubin []byte, cached bool, err error) {
	main, headers, err := kernelSources()
	if err != nil {
		return nil, false, fmt.Errorf("cuda: reading embedded kernels: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	opts := nvrtcOptions(arch)
	h := sha256.New()
	fmt.Fprintf(h, "strata-cuda-kernels 1\x00nvrtc %d.%d\x00%s\x00", nv.major, nv.minor, strings.Join(opts, " "))
	for _, s := range append([]source{main}, headers...) {
		fmt.Fprintf(h, "%s\x00%d\x00%s", s.name, len(s.text), s.text)
	}
	key := hex.EncodeToString(h.Sum(nil))[:32]

	path := ""
	if cacheDir != "off" {
		if cacheDir == "" {
			if d, err := os.UserCacheDir(); err == nil {
				cacheDir = filepath.Join(d, "strata", "cuda")
			}
		}
		if cacheDir != "" {
			path = filepath.Join(cacheDir, key+".cubin")
			if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
				return b, true, nil
			}
		}
	}
	cubin, err = nv.compile(main, headers, opts)
	if err != nil {
		return nil, false, err
	}
	if path != "" {
		if err := writeAtomic(path, cubin); err != nil {
			log.Warn("cuda: cannot cache compiled kernels", "path", path, "err", err)
		}
	}
	return cubin, false, nil
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
