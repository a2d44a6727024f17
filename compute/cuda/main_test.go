package cuda

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
)

// The device every test and benchmark of the package shares, opened once
// by TestMain; openErr is why there is none.
var (
	testDevice *Device
	openErr    error
)

func TestMain(m *testing.M) {
	// keepGoing: a kernel source that does not build fails only the
	// tests of its kernels (its errors are printed here).
	testDevice, openErr = Open(context.Background(), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), keepGoing: true})
	if testDevice != nil {
		p := testDevice.Props()
		fmt.Printf("cuda: %s, compute capability %d.%d, %d SMs, %d MiB L2, %d GiB, driver %d (%s), NVRTC %s (%s), arch %s\n",
			p.Name, p.Major, p.Minor, p.SMs, p.L2Bytes>>20, p.MemBytes>>30, p.DriverVersion, p.DriverPath,
			p.NVRTCVersion, p.NVRTCPath, p.Arch)
		if err := testDevice.Kernels().unavailable; err != nil {
			fmt.Println("cuda: KERNELS UNAVAILABLE:", err)
		}
	}
	code := m.Run()
	if testDevice != nil {
		if err := testDevice.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// device returns the test device; without a driver the test is skipped
// with one line, and any other failure to open fails it.
func device(tb testing.TB) *Device {
	tb.Helper()
	if testDevice == nil {
		if errors.Is(openErr, ErrNoDriver) {
			tb.Skip(openErr.Error())
		}
		tb.Fatal(openErr)
	}
	return testDevice
}

// do runs fn on the device's thread and fails the test on its error.
func do(tb testing.TB, fn func(th *Thread) error) {
	tb.Helper()
	if err := device(tb).Do(context.Background(), fn); err != nil {
		tb.Fatal(err)
	}
}

// upload allocates device memory holding v.
func upload[T any](th *Thread, v []T) (Ptr, error) {
	b := Bytes(v)
	p, err := th.Alloc(int64(max(len(b), 4)))
	if err != nil {
		return 0, err
	}
	return p, th.CopyToDevice(p, b, th.Stream())
}

// download copies len(v) values from p into v and waits for the copy.
func download[T any](th *Thread, v []T, p Ptr) error {
	if err := th.CopyFromDevice(Bytes(v), p, th.Stream()); err != nil {
		return err
	}
	return th.Sync(th.Stream())
}

// poison is a NaN bit pattern no kernel produces: outputs are filled with
// it first, and any left shows an element the kernel did not write.
const poison = 0x7FA5A5A5

// allocPoisoned allocates n float32s (or int32s) filled with poison.
func allocPoisoned(th *Thread, n int) (Ptr, error) {
	p, err := th.Alloc(int64(4 * max(n, 1)))
	if err != nil {
		return 0, err
	}
	return p, th.Memset32(p, poison, int64(n), th.Stream())
}
