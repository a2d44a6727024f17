package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strata-inference/strata/engine"
)

// serveUntil runs Serve for h on a fresh loopback listener; shutdown ends
// it, and the returned channel gets Serve's result.
func serveUntil(t *testing.T, h *harness, drain time.Duration) (url string, shutdown func(), served chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served = make(chan error, 1)
	go func() { served <- Serve(ctx, ln, h.srv, drain, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	return "http://" + ln.Addr().String(), cancel, served
}

// waitServed waits for Serve to return and requires nil.
func waitServed(t *testing.T, served chan error) {
	t.Helper()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Serve did not return")
	}
}

// TestServeDrains: when Serve's context ends (SIGTERM in strata serve), a
// stream in flight runs to its end ([DONE], every token), new connections
// are refused, and Serve returns nil.
func TestServeDrains(t *testing.T) {
	h := newHarness(t)
	url, shutdown, served := serveUntil(t, h, 0)
	const maxTokens = 150
	body := `{"model":"strata-test","stream":true,"ignore_eos":true,"stream_options":{"include_usage":true},"max_tokens":` +
		itoa(maxTokens) + `,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil { // the stream has begun
		t.Fatal(err)
	}
	shutdown()
	rest, _ := io.ReadAll(resp.Body)
	events := sseEvents(t, strings.NewReader(string(buf)+string(rest)))
	waitServed(t, served)
	var u struct{ Usage usageJSON }
	if len(events) < 2 || events[len(events)-1] != "[DONE]" || json.Unmarshal([]byte(events[len(events)-2]), &u) != nil || u.Usage.CompletionTokens != maxTokens {
		t.Errorf("the drained stream did not complete: %d events, last %q", len(events), events[len(events)-1])
	}
	if _, err := http.Get(url + "/health"); err == nil {
		t.Errorf("a new connection was accepted after shutdown")
	}
	h.waitIdle()
}

// TestServeDrainTimeout: requests that outlast the drain timeout end with
// an error the client can read, not a closed connection: a stream gets a
// chunk with finish_reason "abort" and an error event (then [DONE]), a
// non-streaming request a 503 with code shutting_down; Serve returns nil
// and the engine frees their pages. The engine is held stopped, so the
// requests cannot finish before the timeout whatever the machine's speed.
func TestServeDrainTimeout(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "streaming", false: "non-streaming"}[stream]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, func(c *harnessConfig) { c.noRun = true })
			submitted := make(chan struct{}, 1)
			h.srv.submitHook = func(*engine.Request) { submitted <- struct{}{} }
			url, shutdown, served := serveUntil(t, h, time.Nanosecond)
			body := `{"model":"strata-test","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"stream":` + boolJSON(stream) + `}`
			type result struct {
				status int
				body   string
				err    error
			}
			got := make(chan result, 1)
			go func() {
				resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					got <- result{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				got <- result{resp.StatusCode, string(b), err}
			}()
			<-submitted // the handler runs: its connection was accepted
			shutdown()
			waitServed(t, served)
			r := <-got
			if r.err != nil {
				t.Fatalf("the client saw %v, not a response", r.err)
			}
			if stream {
				events := sseEvents(t, strings.NewReader(r.body))
				n := len(events)
				if n < 3 || events[n-1] != "[DONE]" {
					t.Fatalf("the cut stream does not end with [DONE]: %q", events)
				}
				var e errorBody
				if json.Unmarshal([]byte(events[n-2]), &e) != nil || e.Error.Code == nil || *e.Error.Code != "shutting_down" {
					t.Errorf("the event before [DONE] is %s, want an error with code shutting_down", events[n-2])
				}
				var c chatChunkJSON
				if json.Unmarshal([]byte(events[n-3]), &c) != nil || len(c.Choices) != 1 || c.Choices[0].FinishReason == nil || *c.Choices[0].FinishReason != "abort" {
					t.Errorf("the chunk before the error is %s, want finish_reason abort", events[n-3])
				}
			} else {
				var e errorBody
				if r.status != http.StatusServiceUnavailable || json.Unmarshal([]byte(r.body), &e) != nil || e.Error.Code == nil || *e.Error.Code != "shutting_down" {
					t.Errorf("status %d body %s, want 503 with code shutting_down", r.status, r.body)
				}
			}
			h.startEngine()
			h.waitIdle()
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func boolJSON(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
