package cuda

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestNVRTCCandidatesOrder(t *testing.T) {
	files := map[string][]string{
		"/usr/local/cuda-*/lib64":                                                    {"/usr/local/cuda-12.4/lib64", "/usr/local/cuda-13.0/lib64"},
		"/override/libnvrtc.so*":                                                     {"/override/libnvrtc.so.12"},
		"/ld/libnvrtc.so*":                                                           {"/ld/libnvrtc.so", "/ld/libnvrtc.so.13.0.48", "/ld/libnvrtc.so.13"},
		"/usr/local/cuda-13.0/lib64/libnvrtc.so*":                                    {"/usr/local/cuda-13.0/lib64/libnvrtc.so.13"},
		"/usr/local/cuda-12.4/lib64/libnvrtc.so*":                                    {"/usr/local/cuda-12.4/lib64/libnvrtc.so.12"},
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib":                       {"/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib"},
		"/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so*": {"/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13"},
	}
	env := searchEnv{
		getenv: func(k string) string {
			if k == "LD_LIBRARY_PATH" {
				return "/ld::"
			}
			return ""
		},
		glob: func(p string) ([]string, error) { return files[p], nil },
	}
	got := nvrtcCandidates("/override", env)
	want := []string{
		"/override/libnvrtc.so.12",
		"/ld/libnvrtc.so.13.0.48", "/ld/libnvrtc.so.13", "/ld/libnvrtc.so",
		"/usr/local/cuda-13.0/lib64/libnvrtc.so.13", "/usr/local/cuda-12.4/lib64/libnvrtc.so.12",
		"/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
		"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
	}
	if !slices.Equal(got, want) {
		t.Errorf("nvrtcCandidates:\n got %q\nwant %q", got, want)
	}
	d := driverCandidates("/override", env)
	if d[0] != "/override/libcuda.so.1" || d[1] != "libcuda.so.1" {
		t.Errorf("driverCandidates start %q, want the override then the bare soname", d[:2])
	}
	for _, p := range d {
		if strings.Contains(p, "stubs") {
			t.Errorf("driverCandidates has the toolkit's stub %q", p)
		}
	}
}

// TestCallC checks the calling mechanism every driver call goes through
// on a library every Linux machine has: strlen of a Go string, and a
// C string read back (getenv).
func TestCallC(t *testing.T) {
	if !dynamicLoading {
		t.Skip("cuda: no dynamic loading in this build")
	}
	h, err := dlopen("libc.so.6")
	if err != nil {
		t.Skip("cuda: no libc.so.6 to call: " + err.Error())
	}
	strlen, err := dlsym(h, "strlen")
	if err != nil {
		t.Fatal(err)
	}
	s := cstr("strata on the GPU")
	if n := ccall(strlen, uintptr(unsafe.Pointer(&s[0]))); n != 17 {
		t.Errorf("strlen = %d, want 17", n)
	}
	getenv, _ := dlsym(h, "getenv")
	t.Setenv("STRATA_CUDA_TEST", "value")
	name := cstr("STRATA_CUDA_TEST")
	if got := cString(ccall(getenv, uintptr(unsafe.Pointer(&name[0])))); got != "value" {
		t.Errorf("getenv = %q, want %q", got, "value")
	}
}

func TestKernelUnits(t *testing.T) {
	units, headers, err := kernelUnits()
	if err != nil {
		t.Fatal(err)
	}
	if len(units) < 3 || len(headers) == 0 {
		t.Fatalf("kernel sources: %d units, %d headers", len(units), len(headers))
	}
	for _, u := range units {
		if !strings.Contains(u.text, "#line 1 \""+u.name+"\"") || !strings.Contains(u.text, "#include \"common.cuh\"") {
			t.Errorf("unit %s lacks its #line or the common header", u.name)
		}
		if strings.Contains(u.text, "clang_shim") {
			t.Errorf("the clang shim reached the NVRTC sources of %s", u.name)
		}
	}
}

func TestDeviceMemory(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 1<<20+13)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	got := make([]byte, len(src))
	do(t, func(th *Thread) error {
		s := th.Stream()
		a, err := upload(th, src)
		if err != nil {
			return err
		}
		defer th.Free(a)
		b, err := th.Alloc(int64(len(src)))
		if err != nil {
			return err
		}
		defer th.Free(b)
		if err := th.Memset8(b, 0xEE, int64(len(src)), s); err != nil {
			return err
		}
		if err := th.Copy(b.Add(1), a.Add(1), int64(len(src)-2), s); err != nil {
			return err
		}
		// Down through pinned staging, asynchronously.
		h, err := th.AllocHost(len(src))
		if err != nil {
			return err
		}
		defer th.FreeHost(h)
		if err := th.CopyFromDevice(h.Bytes(), b, s); err != nil {
			return err
		}
		if err := th.Sync(s); err != nil {
			return err
		}
		copy(got, h.Bytes())
		free, total, err := th.MemInfo()
		if err != nil || free <= 0 || free > total {
			t.Errorf("MemInfo = %d free of %d, %v", free, total, err)
		}
		return nil
	})
	want := slices.Clone(src)
	want[0], want[len(want)-1] = 0xEE, 0xEE
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("round trip differs first at byte %d: %#x, want %#x", i, got[i], want[i])
	}
}

func TestThreadOutsideDo(t *testing.T) {
	var leaked *Thread
	do(t, func(th *Thread) error { leaked = th; return nil })
	if _, err := leaked.Alloc(16); err == nil {
		t.Error("Alloc through a Thread outside Do succeeded")
	}
	err := device(t).Do(t.Context(), func(*Thread) error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("panic in Do gave %v", err)
	}
	do(t, func(th *Thread) error { _, _, err := th.MemInfo(); return err }) // still usable
}

func TestEventsAndGraph(t *testing.T) {
	const n = 1 << 16
	rng := rand.New(rand.NewPCG(3, 4))
	x := randFloats(rng, 8*n)
	var direct, replay []float32
	var ms float64
	do(t, func(th *Thread) error {
		k := device(t).Kernels()
		s, err := th.NewStream()
		if err != nil {
			return err
		}
		defer th.DestroyStream(s)
		xs, err := upload(th, x)
		if err != nil {
			return err
		}
		defer th.Free(xs)
		ys, err := th.Alloc(4 * 8 * n)
		if err != nil {
			return err
		}
		defer th.Free(ys)
		work := func() error {
			if err := k.RMSNorm(th, s, ys, xs, 0, 8, n, 1e-6); err != nil {
				return err
			}
			return k.Softmax(th, s, ys, 8, n)
		}
		if err := work(); err != nil {
			return err
		}
		direct = make([]float32, 8*n)
		if err := th.Sync(s); err != nil {
			return err
		}
		if err := th.CopyFromDevice(Bytes(direct), ys, s); err != nil {
			return err
		}
		if err := th.Memset32(ys, poison, 8*n, s); err != nil {
			return err
		}
		if err := th.BeginCapture(s); err != nil {
			return err
		}
		if err := work(); err != nil {
			return err
		}
		g, err := th.EndCapture(s)
		if err != nil {
			return err
		}
		defer th.DestroyGraph(g)
		ge, err := th.Instantiate(g)
		if err != nil {
			return err
		}
		defer th.DestroyGraphExec(ge)
		e0, _ := th.NewEvent(true)
		e1, _ := th.NewEvent(true)
		defer th.DestroyEvent(e0)
		defer th.DestroyEvent(e1)
		th.Record(e0, s)
		if err := th.LaunchGraph(ge, s); err != nil {
			return err
		}
		th.Record(e1, s)
		if err := th.EventSync(e1); err != nil {
			return err
		}
		if ms, err = th.Elapsed(e0, e1); err != nil {
			return err
		}
		replay = make([]float32, 8*n)
		if err := th.CopyFromDevice(Bytes(replay), ys, s); err != nil {
			return err
		}
		return th.Sync(s)
	})
	if !slices.Equal(bitsOf(direct), bitsOf(replay)) {
		t.Error("graph replay differs from the direct launches")
	}
	if !(ms > 0 && ms < 1000) {
		t.Errorf("graph replay timed at %v ms", ms)
	}
}

func TestKernelCacheFile(t *testing.T) {
	dir := t.TempDir()
	d := device(t)
	_ = d
	nv, err := loadNVRTC("", osSearchEnv())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b1, err := buildKernels(nv, d.Props().Arch, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	compile := time.Since(start)
	start = time.Now()
	b2, err := buildKernels(nv, d.Props().Arch, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	load := time.Since(start)
	var size int
	for i := range b1 {
		if b1[i].err != nil {
			t.Errorf("%s: %v", b1[i].unit, b1[i].err)
			continue
		}
		if b1[i].cached || !b2[i].cached || !bytes.Equal(b1[i].cubin, b2[i].cubin) {
			t.Errorf("%s: first build cached %v, second cached %v, same %v", b1[i].unit, b1[i].cached, b2[i].cached, bytes.Equal(b1[i].cubin, b2[i].cubin))
		}
		size += len(b1[i].cubin)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.cubin"))
	if len(files) != len(b1) {
		t.Errorf("cache holds %v", files)
	}
	t.Logf("NVRTC %s compile of %d units %v (in parallel), cache load %v, cubins %d KiB", nv.path, len(b1),
		compile.Round(time.Millisecond), load.Round(time.Microsecond), size>>10)
}

// BenchmarkCallC is the cost of one C call through purego (strlen of a
// short string), the floor under every driver call.
func BenchmarkCallC(b *testing.B) {
	if !dynamicLoading {
		b.Skip("cuda: no dynamic loading in this build")
	}
	h, err := dlopen("libc.so.6")
	if err != nil {
		b.Skip("cuda: no libc.so.6: " + err.Error())
	}
	strlen, _ := dlsym(h, "strlen")
	s := cstr("strata")
	const n = 100000
	for b.Loop() {
		start := time.Now()
		for range n {
			ccall(strlen, uintptr(unsafe.Pointer(&s[0])))
		}
		b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "ns/call")
	}
}
