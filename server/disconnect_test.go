package server

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestDisconnectFreesPages: a client that goes away mid-stream cancels its
// request, and the engine frees every page the request held at its next
// step: every page of the pool is free again (checked after each engine
// step), except those of prefix-cache snapshots when the engine keeps them,
// long before the request's 3000 tokens could have been generated. Both a
// streaming and a non-streaming client are killed.
func TestDisconnectFreesPages(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "streaming", false: "non-streaming"}[stream]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			body := `{"model":"strata-test","max_tokens":3000,"ignore_eos":true,"messages":[{"role":"user","content":"Generate for a long time."}]`
			if stream {
				body += `,"stream":true`
			}
			body += `}`
			ctx, kill := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, "POST", h.url+"/v1/chat/completions", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				if stream {
					// Read a few events, proof that tokens are flowing.
					sc := bufio.NewScanner(resp.Body)
					for n := 0; n < 6 && sc.Scan(); {
						if sc.Text() != "" {
							n++
						}
					}
				}
				<-ctx.Done()
			}()
			h.waitFor("the request to hold pages and have generated tokens", func() bool {
				st := h.eng.Stats()
				return st.Running == 1 && st.OutTokens >= 5 && len(h.eng.Pool().UsedPages()) > 0
			})
			kill()
			<-done
			h.waitIdle()
			st := h.eng.Stats()
			if st.Cancelled != 1 || st.Finished != 0 {
				t.Errorf("engine finished %d and cancelled %d requests; want 0 and 1", st.Finished, st.Cancelled)
			}
			if st.OutTokens >= 3000 {
				t.Errorf("the request ran to the end (%d tokens)", st.OutTokens)
			}
			t.Logf("pool whole after the client went away, %d tokens generated", st.OutTokens)
		})
	}
}
