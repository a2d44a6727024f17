package cuda

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// LibDirEnv names the environment variable that, when set, is the first
// directory searched for libcuda.so.1 and libnvrtc.so*.
const LibDirEnv = "STRATA_CUDA_LIB_DIR"

// searchEnv is what the library search reads from the environment, so
// that tests can give it another.
type searchEnv struct {
	getenv func(string) string
	glob   func(string) ([]string, error)
	home   string
}

func osSearchEnv() searchEnv {
	home, _ := os.UserHomeDir()
	return searchEnv{getenv: os.Getenv, glob: filepath.Glob, home: home}
}

// driverCandidates returns the paths to try for the driver library, in
// order: the override directory, the loader's own search (bare soname),
// then the directories drivers are usually installed in. The CUDA
// toolkit's stubs directory is never tried: its libcuda only fails.
func driverCandidates(override string, env searchEnv) []string {
	const name = "libcuda.so.1"
	var c []string
	if override != "" {
		c = append(c, filepath.Join(override, name))
	}
	c = append(c, name)
	for _, d := range []string{
		"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
		"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib",
	} {
		c = append(c, filepath.Join(d, name))
	}
	return c
}

// nvrtcCandidates returns the NVRTC libraries to try, in order: in the
// override directory, in LD_LIBRARY_PATH, in CUDA_PATH/CUDA_HOME, in
// /usr/local/cuda*/lib64 (newest toolkit first), in the system library
// directories, and in Python wheels (site-packages/nvidia/*/lib, as the
// nvidia-cuda-nvrtc wheels install it). Within a directory the highest
// version comes first. Last come bare sonames for the loader to find.
func nvrtcCandidates(override string, env searchEnv) []string {
	var dirs []string
	if override != "" {
		dirs = append(dirs, override)
	}
	for _, d := range strings.Split(env.getenv("LD_LIBRARY_PATH"), ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	for _, v := range []string{"CUDA_PATH", "CUDA_HOME"} {
		if p := env.getenv(v); p != "" {
			dirs = append(dirs, filepath.Join(p, "lib64"), filepath.Join(p, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	toolkits, _ := env.glob("/usr/local/cuda-*/lib64")
	slices.SortFunc(toolkits, func(a, b string) int { return compareVersions(b, a) })
	dirs = append(dirs, toolkits...)
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64")
	var sitePatterns []string
	if v := env.getenv("VIRTUAL_ENV"); v != "" {
		sitePatterns = append(sitePatterns, filepath.Join(v, "lib/python3*/site-packages"))
	}
	if env.home != "" {
		sitePatterns = append(sitePatterns, filepath.Join(env.home, ".local/lib/python3*/site-packages"))
	}
	sitePatterns = append(sitePatterns,
		"/opt/*/.venv/lib/python3*/site-packages", "/opt/*/lib/python3*/site-packages",
		"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages")
	for _, p := range sitePatterns {
		libs, _ := env.glob(filepath.Join(p, "nvidia/*/lib"))
		slices.Sort(libs)
		dirs = append(dirs, libs...)
	}

	var c []string
	seen := map[string]bool{}
	for _, d := range dirs {
		libs, _ := env.glob(filepath.Join(d, "libnvrtc.so*"))
		slices.SortFunc(libs, func(a, b string) int { return compareVersions(b, a) })
		for _, l := range libs {
			if !seen[l] {
				seen[l] = true
				c = append(c, l)
			}
		}
	}
	return append(c, "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")
}

// compareVersions orders paths by the numbers in their last element
// (libnvrtc.so.12.8.93 > libnvrtc.so.12 > libnvrtc.so; cuda-13.0 > cuda-12.9).
func compareVersions(a, b string) int {
	va, vb := versionOf(a), versionOf(b)
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

func versionOf(path string) []int {
	base := filepath.Base(filepath.Clean(path))
	if strings.HasSuffix(path, "/lib64") || strings.HasSuffix(path, "/lib") {
		base = filepath.Base(filepath.Dir(filepath.Clean(path)))
	}
	var v []int
	for _, f := range strings.FieldsFunc(base, func(r rune) bool { return r < '0' || r > '9' }) {
		n, err := strconv.Atoi(f)
		if err == nil {
			v = append(v, n)
		}
	}
	return v
}

// builtinsFor returns the libnvrtc-builtins libraries beside the NVRTC
// library at path, which NVRTC loads by soname during compilation:
// preloading the one beside it makes that work where the loader's path
// does not reach that directory.
func builtinsFor(path string, env searchEnv) []string {
	if !strings.Contains(path, "/") {
		return nil
	}
	libs, _ := env.glob(filepath.Join(filepath.Dir(path), "libnvrtc-builtins.so*"))
	slices.SortFunc(libs, func(a, b string) int { return compareVersions(b, a) })
	return libs
}
