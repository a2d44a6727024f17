package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/comm/nccl"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/golden"
	"github.com/strata-inference/strata/model/deepseekv4"
)

// TestServeRanks: strata serve -device cpu -ranks 3 serves the shipped
// model on three in-process ranks (one pool each): greedy requests through
// the engine give the single-device ids, and a chat completion comes back.
func TestServeRanks(t *testing.T) {
	cfg := serveFlags(t, "-model", root("models/strata-kjv"), "-ranks", "3", "-cache-memory", "32MiB", "-threads", "3")
	s, err := loadServed(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p, ok := s.model.(*deepseekv4.Parallel)
	if !ok || p.Ranks() != 3 || len(s.eng.Pools()) != 3 {
		t.Fatalf("model %T, %d pools; want a Parallel model on 3 ranks, a pool each", s.model, len(s.eng.Pools()))
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.eng.Run(ctx); close(done) }()
	defer func() { stop(); <-done }()

	one, err := deepseekv4.Load(root("models/strata-kjv"), cpu.New(0))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	var streams []*engine.Stream
	var want [][]int32
	for i := range 4 {
		prompt := s.tok.Encode(fmt.Sprintf("And it came to pass, in the %d days", i+2), true)
		w, err := golden.Greedy(ctx, one, prompt, 12)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, w)
		st, err := s.eng.Submit(ctx, engine.Request{Prompt: prompt, MaxTokens: 12})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	for i, st := range streams {
		got, _, err := st.Collect(ctx)
		if err != nil || !slices.Equal(got, want[i]) {
			t.Errorf("request %d: %v (%v), one device %v", i, got, err, want[i])
		}
	}

	srv := httptest.NewServer(s.srv)
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{"model": s.name, "max_tokens": 6,
		"messages": []map[string]string{{"role": "user", "content": "Who begat whom?"}}})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil || r.Usage.CompletionTokens == 0 {
		t.Fatalf("chat completion: status %d: %s", resp.StatusCode, b)
	}
}

// TestRankFlagErrors: -gpus and -ranks that do not fit -device, or a
// model that is not DeepSeek-V4, are errors that say what to give.
func TestRankFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-gpus", "2"}, "-gpus 2 needs -device cuda or cuda-fast (-ranks 2 runs the same path on the CPU)"},
		{[]string{"-device", "cuda", "-ranks", "2"}, "-ranks 2 is for -device cpu; on GPUs give -gpus 2"},
		{[]string{"-device", "cuda:1", "-gpus", "2"}, "-device cuda:1 names one GPU (give -device cuda)"},
		{[]string{"-device", "cuda", "-gpus", "0"}, "-gpus 0: want 1 or more"},
		{[]string{"-gpus", "2", "-ranks", "2", "-device", "cuda"}, "do not go together"},
	} {
		cfg := serveFlags(t, append([]string{"-model", root("models/strata-kjv")}, tc.args...)...)
		_, err := loadServed(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	cfg := serveFlags(t, "-model", qwenFolder(t), "-ranks", "2")
	if _, err := loadServed(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "only DeepSeek-V4 checkpoints run on several ranks") {
		t.Errorf("Qwen3.5 on 2 ranks: %v", err)
	}
}

// TestServeGPUsHere: -device cuda -gpus 2 on this machine fails at start
// with an error about -gpus 2 (whichever piece is missing first: the
// driver, a second GPU, NCCL, or the CUDA backend's interfaces), never
// with a server.
func TestServeGPUsHere(t *testing.T) {
	cfg := serveFlags(t, "-model", root("models/strata-kjv"), "-device", "cuda", "-gpus", "2")
	s, err := loadServed(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		s.Close()
		t.Fatal("serving on 2 GPUs started, but the CUDA backend offers neither nccl.Device nor compute.RoutedExperts")
	}
	if !strings.HasPrefix(err.Error(), "-gpus 2") {
		t.Fatalf("error %v does not begin with -gpus 2", err)
	}
	t.Log(err)
}

// cpuGPU stands for a GPU backend that offers nccl.Device.
type cpuGPU struct {
	*cpu.Backend
	ord int
}

func (g cpuGPU) Ordinal() int                                  { return g.ord }
func (g cpuGPU) OnStream(fn func(uintptr) error) error         { return fn(0) }
func (g cpuGPU) DevicePointer(compute.Tensor) (uintptr, error) { return 0, nil }

// TestOpenGPUsErrors: each missing piece of a multi-GPU start is its own
// error, checked before anything heavier is opened.
func TestOpenGPUsErrors(t *testing.T) {
	lib := &nccl.Library{}
	good := func() gpuMachine {
		return gpuMachine{
			count: func() (int, error) { return 2, nil },
			nccl:  func() (*nccl.Library, error) { return lib, nil },
			open: func(ord int, _ string) (compute.Backend, error) {
				return cpuGPU{cpu.New(1), ord}, nil
			},
			comms: func(*nccl.Library, []nccl.Device) ([]*nccl.Comm, error) { return nil, errors.New("no NCCL here") },
		}
	}
	opened := 0
	for _, tc := range []struct {
		name string
		edit func(*gpuMachine)
		want string
	}{
		{"no driver", func(m *gpuMachine) {
			m.count = func() (int, error) { return 0, fmt.Errorf("%w (libcuda.so.1): not found", nccl.ErrNoDriver) }
		}, "-gpus 2: no usable NVIDIA GPU: nccl: no NVIDIA driver (libcuda.so.1): not found (-device cpu -ranks 2 runs the same path on the CPU)"},
		{"one GPU", func(m *gpuMachine) { m.count = func() (int, error) { return 1, nil } }, "-gpus 2: this machine has 1 GPU(s)"},
		{"no NCCL", func(m *gpuMachine) {
			m.nccl = func() (*nccl.Library, error) {
				return nil, fmt.Errorf("%w (libnccl.so.2): tried 9 places", nccl.ErrNoNCCL)
			}
		}, "-gpus 2 needs NCCL 2.7 or later: nccl: no NCCL library (libnccl.so.2): tried 9 places (install it"},
		{"a GPU fails", func(m *gpuMachine) {
			m.open = func(ord int, _ string) (compute.Backend, error) {
				opened++
				if ord == 1 {
					return nil, errors.New("out of memory")
				}
				return cpuGPU{cpu.New(1), ord}, nil
			}
		}, "-gpus 2: GPU 1: out of memory"},
		{"no nccl.Device", func(m *gpuMachine) {
			m.open = func(int, string) (compute.Backend, error) { return cpu.New(1), nil }
		}, "-gpus 2: the cpu backend does not offer nccl.Device yet"},
		{"communicators", func(*gpuMachine) {}, "-gpus 2: no NCCL here"},
	} {
		m := good()
		tc.edit(&m)
		_, _, err := openGPUs(m, 2, "cuda")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	if opened != 2 {
		t.Errorf("the failing GPU case opened %d GPUs, want 2", opened)
	}
}
