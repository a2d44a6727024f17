package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/strata-inference/strata/server/loadgen"
)

// syncBuffer is a bytes.Buffer safe for the server's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (h *harness) metrics() map[string]float64 {
	h.t.Helper()
	resp, err := http.Get(h.url + "/metrics")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	m, err := loadgen.ParseMetrics(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

// TestMetrics: /metrics counts requests by endpoint and status, the prompt
// and generated tokens the responses' usage reports, one time to first
// token per choice and one inter-token latency per later token; the
// engine's gauges (queue, running, pages per cache kind, pool size) are
// there and idle afterwards. The access log has a line per request.
func TestMetrics(t *testing.T) {
	logs := &syncBuffer{}
	h := newHarness(t, func(c *harnessConfig) { c.log = logs })
	var prompt, completion, choices int
	for _, body := range []string{
		`{"model":"strata-test","max_tokens":5,"ignore_eos":true,"messages":[{"role":"user","content":"one"}]}`,
		`{"model":"strata-test","max_tokens":7,"n":2,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"two"}]}`,
	} {
		status, data := h.post("/v1/chat/completions", body)
		if status != 200 {
			t.Fatalf("status %d: %s", status, data)
		}
		var u struct{ Usage usageJSON }
		if strings.HasPrefix(string(data), "data:") {
			events := sseEvents(t, bytes.NewReader(data))
			json.Unmarshal([]byte(events[len(events)-2]), &u)
		} else {
			json.Unmarshal(data, &u)
		}
		prompt += u.Usage.PromptTokens
		completion += u.Usage.CompletionTokens
	}
	choices = 3
	status, data := h.post("/v1/completions", `{"model":"strata-test","prompt":"three","max_tokens":4,"ignore_eos":true}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, data)
	}
	var u struct{ Usage usageJSON }
	json.Unmarshal(data, &u)
	prompt += u.Usage.PromptTokens
	completion += u.Usage.CompletionTokens
	choices++
	h.post("/v1/completions", `{"model":"strata-test","prompt":"x","temperature":9}`)
	h.waitIdle()

	m := h.metrics()
	want := map[string]float64{
		`strata_requests_total{endpoint="/v1/chat/completions",status="200"}`: 2,
		`strata_requests_total{endpoint="/v1/completions",status="200"}`:      1,
		`strata_requests_total{endpoint="/v1/completions",status="400"}`:      1,
		"strata_prompt_tokens_total":                                          float64(prompt),
		"strata_generation_tokens_total":                                      float64(completion),
		"strata_time_to_first_token_seconds_count":                            float64(choices),
		"strata_inter_token_latency_seconds_count":                            float64(completion - choices),
		"strata_running_requests":                                             0,
		"strata_queue_depth":                                                  0,
		"strata_cache_pages_total":                                            float64(h.eng.Pool().NumPages()),
		"strata_cache_pages_free":                                             float64(h.eng.Pool().NumPages()),
	}
	if completion != 5+14+4 {
		t.Errorf("usage says %d tokens generated, want 23", completion)
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %g (present %v), want %g", k, got, ok, v)
		}
	}
	used := 0.0
	for _, s := range h.model.CacheSpecs() {
		k := `strata_cache_pages_used{kind="` + s.Name + `"}`
		v, ok := m[k]
		if !ok {
			t.Errorf("%s is missing", k)
		}
		used += v
	}
	if want := m["strata_prefix_cache_pages"]; used != want || want != float64(prefixPages(h.eng.Stats())) {
		t.Errorf("strata_cache_pages_used adds up to %g, want strata_prefix_cache_pages %g (no request's pages; prefix-cache snapshots only)", used, want)
	}
	log := logs.String()
	if n := strings.Count(log, "msg=request "); n != 4 {
		t.Errorf("%d access log lines, want 4 (metrics scrapes log at debug):\n%s", n, log)
	}
	for _, s := range []string{"status=400", "path=/v1/completions", "completion_tokens=14", "prompt_tokens="} {
		if !strings.Contains(log, s) {
			t.Errorf("access log lacks %q:\n%s", s, log)
		}
	}
}

// TestModelsAndHealth: GET /v1/models lists the served model (also through
// openai-go), GET /v1/models/{name} returns it, GET /health answers ok.
func TestModelsAndHealth(t *testing.T) {
	h := newHarness(t)
	page, err := h.client.Models.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "strata-test" || page.Data[0].OwnedBy != "strata" {
		t.Errorf("models %s", page.RawJSON())
	}
	m, err := h.client.Models.Get(t.Context(), "strata-test")
	if err != nil || m.ID != "strata-test" {
		t.Errorf("model %v, %v", m, err)
	}
	resp, err := http.Get(h.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("health: %d", resp.StatusCode)
	}
}
