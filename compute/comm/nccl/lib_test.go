package nccl

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestCandidates: the override directory, LD_LIBRARY_PATH and the loader
// come first, then toolkits newest first, system directories and Python
// wheels; nothing is tried twice.
func TestCandidates(t *testing.T) {
	env := searchEnv{
		getenv: func(k string) string {
			return map[string]string{"LD_LIBRARY_PATH": "/opt/a::/usr/lib64", "CUDA_HOME": "/opt/cuda"}[k]
		},
		glob: func(p string) ([]string, error) {
			switch p {
			case "/usr/local/cuda-*/lib64":
				return []string{"/usr/local/cuda-12.4/lib64", "/usr/local/cuda-13.0/lib64", "/usr/local/cuda-12.10/lib64"}, nil
			case "/home/u/.local/lib/python3*/site-packages/nvidia/nccl/lib":
				return []string{"/home/u/.local/lib/python3.12/site-packages/nvidia/nccl/lib"}, nil
			}
			return nil, nil
		},
		home: "/home/u",
	}
	got := candidates("/x", env)
	want := []string{
		"/x/libnccl.so.2", "/opt/a/libnccl.so.2", "/usr/lib64/libnccl.so.2", "libnccl.so.2",
		"/opt/cuda/lib64/libnccl.so.2", "/opt/cuda/lib/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2",
		"/usr/local/cuda-13.0/lib64/libnccl.so.2", "/usr/local/cuda-12.10/lib64/libnccl.so.2", "/usr/local/cuda-12.4/lib64/libnccl.so.2",
		"/usr/lib/x86_64-linux-gnu/libnccl.so.2", "/usr/lib/aarch64-linux-gnu/libnccl.so.2", "/usr/lib/libnccl.so.2",
		"/home/u/.local/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("candidates\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLoadMissing: with no library where it looks, Load's error wraps
// ErrNoNCCL and says what to set.
func TestLoadMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := loadFrom([]string{filepath.Join(dir, "libnccl.so.2"), filepath.Join(dir, "lib64", "libnccl.so.2")})
	if !errors.Is(err, ErrNoNCCL) || !strings.Contains(err.Error(), "libnccl.so.2") {
		t.Fatalf("error %v, want ErrNoNCCL naming libnccl.so.2", err)
	}
	if dynamicLoading && !strings.Contains(err.Error(), LibDirEnv) {
		t.Errorf("error %v does not say to set %s", err, LibDirEnv)
	}
}

// TestNVLSGuard: NCCL_NVLS_ENABLE is set to 0 when unset, left at 0, and
// any other value is refused before NCCL could read it.
func TestNVLSGuard(t *testing.T) {
	for _, tc := range []struct {
		have    string
		set     bool
		wantErr bool
		wantSet bool
	}{
		{set: false, wantSet: true},
		{have: "0", set: true},
		{have: " 0 ", set: true},
		{have: "1", set: true, wantErr: true},
		{have: "", set: true, wantErr: true},
	} {
		env := &mapEnv{m: map[string]string{}}
		if tc.set {
			env.m[NVLSEnv] = tc.have
		}
		err := keepNVLSOff(env)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s=%q (set %v): error %v", NVLSEnv, tc.have, tc.set, err)
		}
		if env.sets != map[bool]int{true: 1, false: 0}[tc.wantSet] || (tc.wantSet && env.m[NVLSEnv] != "0") {
			t.Errorf("%s=%q (set %v): %d sets, value %q", NVLSEnv, tc.have, tc.set, env.sets, env.m[NVLSEnv])
		}
	}
}

type mapEnv struct {
	m    map[string]string
	sets int
}

func (e *mapEnv) lookup(k string) (string, bool) { v, ok := e.m[k]; return v, ok }
func (e *mapEnv) set(k, v string) error {
	e.sets++
	e.m[k] = v
	return nil
}

// TestGPUCountErrors: without a driver where it looks, GPUCount's error
// wraps ErrNoDriver.
func TestGPUCountErrors(t *testing.T) {
	_, err := gpuCount([]string{filepath.Join(t.TempDir(), "libcuda.so.1")})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("error %v, want ErrNoDriver", err)
	}
}
