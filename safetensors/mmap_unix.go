//go:build unix

package safetensors

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps the file at path read-only and shared, and returns its bytes
// and a function that unmaps them.
func mapFile(path string) ([]byte, func() error, error) {
	// Check before opening: opening a named pipe would block.
	if fi, err := os.Stat(path); err != nil {
		return nil, nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	size := fi.Size()
	if !intSize(size) {
		return nil, nil, fmt.Errorf("%s: file of %d bytes is too large to map", path, size)
	}
	if size == 0 {
		// mmap rejects empty mappings; the caller reports the short file.
		return []byte{}, func() error { return nil }, nil
	}
	sc, err := fh.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	var mem []byte
	var merr error
	if err := sc.Control(func(fd uintptr) {
		mem, merr = syscall.Mmap(int(fd), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	}); err != nil {
		return nil, nil, err
	}
	if merr != nil {
		return nil, nil, &os.PathError{Op: "mmap", Path: path, Err: merr}
	}
	return mem, func() error { return syscall.Munmap(mem) }, nil
}
