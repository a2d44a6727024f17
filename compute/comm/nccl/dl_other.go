//go:build !(linux && (amd64 || arm64)) || nocuda

package nccl

import (
	"fmt"
	"runtime"
)

const dynamicLoading = false

func dlopen(string) (uintptr, error) {
	return 0, fmt.Errorf("loading shared libraries is not supported on %s/%s in this build", runtime.GOOS, runtime.GOARCH)
}

func dlsym(uintptr, string) (uintptr, error) { return 0, fmt.Errorf("no dynamic loading") }

func ccall(uintptr, ...uintptr) uintptr { panic("nccl: no dynamic loading in this build") }

func cString(uintptr) string { return "" }
