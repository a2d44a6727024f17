//go:build !unix

package safetensors

import (
	"fmt"
	"os"
)

// mapFile reads the whole file at path into memory; this platform has no
// mmap support here.
func mapFile(path string) ([]byte, func() error, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	if !intSize(fi.Size()) {
		return nil, nil, fmt.Errorf("%s: file of %d bytes is too large to read", path, fi.Size())
	}
	mem, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return mem, func() error { return nil }, nil
}
