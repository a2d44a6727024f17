package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestDisaggregated: a chat completion through a prefill worker that hands
// each request to a decode worker (two engines, two copies of the model,
// talking over loopback HTTP) equals the same request on one server,
// streaming and not, greedy and seeded sampling.
func TestDisaggregated(t *testing.T) {
	single := newHarness(t)
	decode := newHarness(t, func(c *harnessConfig) { c.opt.AcceptHandoff = true })
	prefill := newHarness(t, func(c *harnessConfig) { c.opt.DecodeURL = decode.url })
	ctx := context.Background()
	for _, temp := range []float64{0, 0.9} {
		params := openai.ChatCompletionNewParams{
			Model:       "strata-test",
			Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("And God said unto Moses,")},
			MaxTokens:   openai.Int(24),
			Temperature: openai.Float(temp),
			Seed:        openai.Int(11),
		}
		want, err := single.client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		got, err := prefill.client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != want.Choices[0].Message.Content || got.Usage.CompletionTokens != want.Usage.CompletionTokens {
			t.Fatalf("temperature %g: handed off %q (%d tokens), one server %q (%d)", temp, got.Choices[0].Message.Content, got.Usage.CompletionTokens,
				want.Choices[0].Message.Content, want.Usage.CompletionTokens)
		}
		stream := prefill.client.Chat.Completions.NewStreaming(ctx, params)
		var text strings.Builder
		for stream.Next() {
			if ch := stream.Current().Choices; len(ch) > 0 {
				text.WriteString(ch[0].Delta.Content)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != want.Choices[0].Message.Content {
			t.Fatalf("temperature %g: streamed %q, want %q", temp, text.String(), want.Choices[0].Message.Content)
		}
	}
	if st := decode.eng.Stats(); st.Finished == 0 {
		t.Fatal("the decode worker finished no request")
	}
	prefill.waitIdle()
	decode.waitIdle()
}

// TestDisaggregatedDisconnect: a client that goes away mid-stream frees the
// request's pages on both workers.
func TestDisaggregatedDisconnect(t *testing.T) {
	decode := newHarness(t, func(c *harnessConfig) { c.opt.AcceptHandoff = true })
	prefill := newHarness(t, func(c *harnessConfig) { c.opt.DecodeURL = decode.url })
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"model":"strata-test","stream":true,"max_tokens":2000,"ignore_eos":true,"messages":[{"role":"user","content":"In the beginning"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, prefill.url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	for n := 0; n < 1500; { // read some of the stream, so decoding is under way remotely
		k, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	decode.waitFor("the decode worker running the request", func() bool { return decode.eng.Stats().Running > 0 })
	if decode.eng.Stats().Running != 1 {
		t.Fatalf("the decode worker is not running the request: %+v", decode.eng.Stats())
	}
	cancel()
	resp.Body.Close()
	prefill.waitIdle()
	decode.waitIdle()
}

// TestHandoffRejected: a decode worker answers a corrupt or foreign state
// with 400 and the reason.
func TestHandoffRejected(t *testing.T) {
	decode := newHarness(t, func(c *harnessConfig) { c.opt.AcceptHandoff = true })
	resp, err := http.Post(decode.url+"/internal/handoff", "application/octet-stream", bytes.NewReader([]byte("STRATAHO not really a state")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Message, Code string }
	}
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &e)
	if resp.StatusCode != http.StatusBadRequest || e.Error.Code != "bad_handoff" || !strings.Contains(e.Error.Message, "handoff state rejected") {
		t.Fatalf("%s: %s", resp.Status, b)
	}
	plain := newHarness(t)
	resp2, err := http.Post(plain.url+"/internal/handoff", "application/octet-stream", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusNotFound {
		t.Fatalf("a server that is not a decode worker answered %s", resp2.Status)
	}
}
