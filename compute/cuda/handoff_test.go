package cuda

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newFakeDevice starts a Device whose goroutine has a Thread with no
// driver, to test the hand-off without a GPU.
func newFakeDevice(t *testing.T) *Device {
	d := &Device{wake: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{})}
	d.setSpin(deviceSpin, callerSpin) // as Open
	ready := make(chan error, 1)
	go d.loop(func() (*Thread, error) { return &Thread{}, nil }, ready)
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	return d
}

// waitParked returns once d's goroutine sleeps on its wake channel: it
// parks when no call came for deviceSpin, and callers that wait here make
// none.
func waitParked(d *Device) {
	for !d.parked.Load() {
		runtime.Gosched()
	}
}

// TestHandOff runs calls from several goroutines, some in quick succession
// and some after the device goroutine has gone to sleep, and
// checks each runs once, on the device goroutine only, with its error.
func TestHandOff(t *testing.T) {
	d := newFakeDevice(t)
	var ran, inside atomic.Int64
	errOdd := errors.New("odd")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 300 {
				if i%50 == 49 {
					waitParked(d) // the next call takes the wake-up path
				}
				err := d.Do(context.Background(), func(th *Thread) error {
					if inside.Add(1) != 1 {
						t.Error("two calls ran at once")
					}
					defer inside.Add(-1)
					if !th.live {
						t.Error("thread not live inside Do")
					}
					ran.Add(1)
					if i%2 == 1 {
						return errOdd
					}
					return nil
				})
				if (i%2 == 1) != errors.Is(err, errOdd) {
					t.Errorf("call %d returned %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	if ran.Load() != 4*300 {
		t.Errorf("%d calls ran, want %d", ran.Load(), 4*300)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Do(ctx, func(*Thread) error { t.Error("ran with a done context"); return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Do with a done context: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Do(context.Background(), func(*Thread) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close: %v", err)
	}
}

// BenchmarkHandOff is the Do round trip with a warm device goroutine; on
// the GPU machine BenchmarkLaunch/do-hop measures the same on the device.
func BenchmarkHandOff(b *testing.B) {
	d := &Device{wake: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{})}
	d.setSpin(deviceSpin, callerSpin) // as Open
	ready := make(chan error, 1)
	go d.loop(func() (*Thread, error) { return &Thread{}, nil }, ready)
	<-ready
	defer d.Close()
	const n = 20000
	for b.Loop() {
		start := time.Now()
		for range n {
			d.Do(context.Background(), func(*Thread) error { return nil })
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "ns/hop")
	}
}

func TestGEMV2Split(t *testing.T) {
	for _, c := range []struct{ rows, nch, split, rowsPerBlock int }{
		{4096, 256, 1, 16}, // fp8 4096x4096: 256 blocks at once
		{1024, 256, 4, 4},  // fp8 1024x4096
		{2048, 128, 2, 8},  // fp4 2048x4096
		{4096, 64, 1, 16},  // fp4 4096x2048
		{10, 1024, 8, 2},   // f32 10x4096
		{3, 3, 1, 16},      // too few chunks to split
	} {
		i, rpb := gemv2Split(c.rows, c.nch)
		if 1<<i != c.split || rpb != c.rowsPerBlock {
			t.Errorf("gemv2Split(%d rows, %d chunks) = split %d, %d rows a block; want %d, %d", c.rows, c.nch, 1<<i, rpb, c.split, c.rowsPerBlock)
		}
	}
}
