package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/server/servertest"
	"github.com/strata-inference/strata/tokenizer"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// The model the tests serve: the shipped model (models/strata-kjv) when it
// is there, otherwise the synthetic one (servertest.ModelDir). The
// synthetic model is written once for the whole test binary in any case,
// for TestSyntheticModel.
var (
	testModelDir     string
	testModelShipped bool
	syntheticDir     string
)

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "strata-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	syntheticDir = filepath.Join(tmp, "synthetic")
	if err := servertest.WriteSynthetic(syntheticDir, 1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if dir, ok := servertest.ShippedModelDir(); ok {
		testModelDir, testModelShipped = dir, true
	} else {
		testModelDir = syntheticDir
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// harnessConfig sizes a test server.
type harnessConfig struct {
	pages    int  // cache pool pages (default: maxSeqs requests of 1024 tokens, and one of 4096)
	maxSeqs  int  // engine MaxSeqs (default 16)
	maxQueue int  // engine queue bound (0: the engine's default)
	noRun    bool // leave the engine stopped; startEngine starts it
	noPrefix bool // the engine without prefix caching
	opt      Options
	log      io.Writer // access and error log (default: discarded)
	modelDir string    // default testModelDir (its tokenizer is used in any case)
	// model, when set, is served instead of the model in modelDir (a
	// scripted model); eos is then its EOS.
	model model.Model
	eos   int32
	// format renders the chats (default DeepSeekV4()).
	format ChatFormat
}

// harness is a live server on a loopback listener (httptest), with its
// engine running in a goroutine, and an openai-go client pointed at it.
type harness struct {
	t      testing.TB
	srv    *Server
	eng    *engine.Engine
	model  *deepseekv4.Model // nil when a scripted model is served
	eos    int32
	tok    *tokenizer.Tokenizer
	http   *httptest.Server
	url    string
	client openai.Client

	runOnce sync.Once
	ctx     context.Context // the engine's; cancelled at cleanup
	stop    context.CancelFunc
	done    chan struct{}
}

func newHarness(t testing.TB, mods ...func(*harnessConfig)) *harness {
	t.Helper()
	cfg := harnessConfig{maxSeqs: 16, opt: Options{ModelName: "strata-test", KeepAlive: -1}, modelDir: testModelDir}
	for _, m := range mods {
		m(&cfg)
	}
	var m model.Model = cfg.model
	var dsv4 *deepseekv4.Model
	maxPos, eos := 1<<20, cfg.eos
	if m == nil {
		var err error
		if dsv4, err = deepseekv4.Load(cfg.modelDir, cpu.New(0)); err != nil {
			t.Fatal(err)
		}
		m, maxPos, eos = dsv4, dsv4.Cfg.MaxPosition, int32(dsv4.Cfg.EOS)
	}
	tok, err := tokenizer.LoadDir(cfg.modelDir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.pages == 0 {
		specs := m.CacheSpecs()
		pb := cache.PageBytesFor(specs)
		cfg.pages = max(cfg.maxSeqs*cache.TotalPages(specs, 1024, pb), cache.TotalPages(specs, 4096, pb)) + 8
	}
	logw := cfg.log
	if logw == nil {
		logw = io.Discard
	}
	logger := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	eng, err := engine.New(m, engine.Config{MaxBatchTokens: 256, MaxSeqs: cfg.maxSeqs, Pages: cfg.pages,
		MaxContext: maxPos, EOS: eos, Logger: logger, NoPrefixCache: cfg.noPrefix})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.maxQueue > 0 {
		eng.SetMaxQueue(cfg.maxQueue)
	}
	opt := cfg.opt
	opt.Logger = logger
	if opt.MaxContext == 0 {
		opt.MaxContext = maxPos
	}
	format := cfg.format
	if format == nil {
		format = DeepSeekV4()
	}
	srv, err := New(eng, tok, format, opt)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, eng: eng, model: dsv4, eos: eos, tok: tok, done: make(chan struct{})}
	h.http = httptest.NewServer(srv)
	h.url = h.http.URL
	h.client = openai.NewClient(option.WithBaseURL(h.url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	h.ctx, h.stop = context.WithCancel(context.Background())
	if !cfg.noRun {
		h.startEngine()
	}
	t.Cleanup(func() {
		h.http.CloseClientConnections()
		h.stop()
		h.startEngine() // so that done closes even if the engine never ran
		<-h.done
		h.http.Close()
		m.Close()
	})
	return h
}

// startEngine runs the engine until the test ends (once).
func (h *harness) startEngine() {
	h.runOnce.Do(func() {
		go func() {
			h.eng.Run(h.ctx)
			close(h.done)
		}()
	})
}

// promptTokens is how many tokens the server's chat prompt for msgs has.
func (h *harness) promptTokens(msgs []chat.Message, tools []chat.Tool, opt ChatOptions) int {
	h.t.Helper()
	text, err := DeepSeekV4().Render(msgs, tools, opt)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(h.tok.Encode(text, true))
}

// force makes every engine request generate text (then EOS), whatever the
// model would: the random test model cannot be asked for a tool call, so
// the tests that need a known reply use this. It proves the path from
// generated tokens to the response, not the model's behaviour.
func (h *harness) force(text string) {
	toks := append(h.tok.Encode(text, true), h.eos)
	h.srv.submitHook = func(r *engine.Request) { r.Forced = toks }
}

// prefixPages is how many pool pages the engine's prefix cache holds:
// snapshots of earlier requests' state kept for reuse, which belong to no
// request.
func prefixPages(st engine.Stats) int { return st.PrefixPages }

// waitIdle waits until the engine holds no request and the pool no page
// of any request (only prefix-cache snapshots, if any).
func (h *harness) waitIdle() {
	h.t.Helper()
	h.waitFor("the engine idle with every request's pages free", func() bool {
		st := h.eng.Stats()
		return st.Waiting == 0 && st.Running == 0 && h.eng.Pool().FreePages()+prefixPages(st) == h.eng.Pool().NumPages()
	})
}

// hangGuard bounds a wait for an engine event: it only turns a hang (a
// bug) into a failure with a message, and never decides a test that works.
const hangGuard = 2 * time.Minute

// waitFor waits until cond holds, checking it after every engine step
// (the events that change what cond reads), not on a timer.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for {
		stepped := h.eng.Stepped()
		if cond() {
			return
		}
		select {
		case <-stepped:
		case <-guard.C:
			st := h.eng.Stats()
			h.t.Fatalf("waited %s for %s: %d waiting, %d running, %d of %d pages free, used %v (engine %+v)",
				hangGuard, what, st.Waiting, st.Running, h.eng.Pool().FreePages(), h.eng.Pool().NumPages(), h.eng.Pool().UsedPages(), st)
		}
	}
}

// post sends a JSON body and returns the status and the response body.
func (h *harness) post(path string, body any) (int, []byte) {
	h.t.Helper()
	var data []byte
	switch b := body.(type) {
	case string:
		data = []byte(b)
	case []byte:
		data = b
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			h.t.Fatal(err)
		}
	}
	resp, err := http.Post(h.url+path, "application/json", bytes.NewReader(data))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, out
}

// sseEvents reads an event stream's data payloads, [DONE] included.
func sseEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var events []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, ":") && !strings.HasPrefix(line, "event: ") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				t.Fatalf("event stream line %q does not start with \"data: \"", line)
			}
			events = append(events, data)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

func userMsg(s string) []chat.Message { return []chat.Message{{Role: chat.RoleUser, Content: s}} }

// lossyUTF8 decodes b as the WHATWG TextDecoder (and Rust's
// from_utf8_lossy) do: each maximal subpart of an ill-formed sequence
// becomes one U+FFFD. The tokenizer's decoder promises the same.
func lossyUTF8(b []byte) string {
	var out strings.Builder
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			out.WriteByte(c)
			i++
			continue
		}
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c == 0xED:
			need, hi = 2, 0x9F
		case c >= 0xE1 && c <= 0xEF:
			need = 2
		case c == 0xF0:
			need, lo = 3, 0x90
		case c == 0xF4:
			need, hi = 3, 0x8F
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		default:
			out.WriteString("\uFFFD")
			i++
			continue
		}
		j := i + 1
		ok := true
		for k := 0; k < need; k++ {
			if j >= len(b) || b[j] < lo || b[j] > hi {
				ok = false
				break
			}
			lo, hi = 0x80, 0xBF
			j++
		}
		if ok {
			out.Write(b[i:j])
		} else {
			out.WriteString("\uFFFD")
		}
		i = j
	}
	return out.String()
}
