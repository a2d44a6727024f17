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
)

// TestServeDrains: when Serve's context ends (SIGTERM in strata serve), a
// stream in flight runs to its end ([DONE], every token), new connections
// are refused, and Serve returns nil. With a drain timeout shorter than
// the stream, the stream is cut, its request cancelled and its pages
// freed, and Serve still returns nil soon after the timeout.
func TestServeDrains(t *testing.T) {
	for _, tc := range []struct {
		name      string
		maxTokens int
		drain     time.Duration
		complete  bool
	}{
		{"drained", 150, 0, true},
		{"timed out", 3000, 200 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			url := "http://" + ln.Addr().String()
			ctx, shutdown := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- Serve(ctx, ln, h.srv, tc.drain, slog.New(slog.NewTextHandler(io.Discard, nil))) }()

			body := `{"model":"strata-test","stream":true,"ignore_eos":true,"stream_options":{"include_usage":true},"max_tokens":` +
				itoa(tc.maxTokens) + `,"messages":[{"role":"user","content":"hi"}]}`
			resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			buf := make([]byte, 1)
			if _, err := resp.Body.Read(buf); err != nil { // the stream has begun
				t.Fatal(err)
			}
			if h.eng.Stats().Running != 1 {
				t.Fatal("the request finished before the shutdown; the test needs a longer one")
			}
			shutdown()
			start := time.Now()
			rest, _ := io.ReadAll(resp.Body)
			events := sseEvents(t, strings.NewReader(string(buf)+string(rest)))
			select {
			case err := <-served:
				if err != nil {
					t.Fatalf("Serve returned %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return")
			}
			if tc.complete {
				var u struct{ Usage usageJSON }
				if len(events) < 2 || events[len(events)-1] != "[DONE]" || json.Unmarshal([]byte(events[len(events)-2]), &u) != nil || u.Usage.CompletionTokens != tc.maxTokens {
					t.Errorf("the drained stream did not complete: %d events, last %q", len(events), events[len(events)-1])
				}
			} else {
				if events[len(events)-1] == "[DONE]" {
					t.Errorf("the stream completed although the drain timed out")
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("Serve took %s to give up draining", d)
				}
			}
			if _, err := http.Get(url + "/health"); err == nil {
				t.Errorf("a new connection was accepted after shutdown")
			}
			h.waitIdle()
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
