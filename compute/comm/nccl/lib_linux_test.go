//go:build linux && (amd64 || arm64) && !nocuda

package nccl

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestLoadNotNCCL: a library that loads but is not NCCL (the C library)
// is refused with the entry points it lacks.
func TestLoadNotNCCL(t *testing.T) {
	_, err := loadFrom([]string{"libc.so.6"})
	if !errors.Is(err, ErrNoNCCL) || !strings.Contains(err.Error(), "missing entry points") || !strings.Contains(err.Error(), "ncclCommInitAll") {
		t.Fatalf("error %v, want ErrNoNCCL listing the missing entry points", err)
	}
}

// TestNVLSReachesC: the guard's setting is in the C library's environment
// (where NCCL's getenv reads it), not only in Go's.
func TestNVLSReachesC(t *testing.T) {
	old, had := os.LookupEnv(NVLSEnv)
	os.Unsetenv(NVLSEnv)
	t.Cleanup(func() {
		if had {
			os.Setenv(NVLSEnv, old)
		} else {
			os.Unsetenv(NVLSEnv)
		}
	})
	if err := keepNVLSOff(osEnv{}); err != nil {
		t.Fatal(err)
	}
	h, err := dlopen("libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	getenv, err := dlsym(h, "getenv")
	if err != nil {
		t.Fatal(err)
	}
	name := append([]byte(NVLSEnv), 0)
	if got := cString(ccall(getenv, uintptr(unsafe.Pointer(&name[0])))); got != "0" {
		t.Fatalf("C getenv(%s) = %q, want 0", NVLSEnv, got)
	}
}
