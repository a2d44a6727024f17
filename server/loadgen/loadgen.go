// Package loadgen runs a bounded load against an OpenAI-compatible server
// (strata serve) and checks every response.
//
// Run sends a fixed number of streaming /v1/completions requests from a
// fixed number of concurrent clients, each with its own prompt, max_tokens
// and seed, and with ignore_eos so that each must generate exactly
// max_tokens tokens. It checks each stream: HTTP 200, well-formed events
// with one id, the finish reason "length" exactly once, as many tokens
// streamed (one log-probability entry each) as max_tokens and as
// usage.completion_tokens, the prompt tokens when the caller can count
// them, the usage event, and [DONE] last. It then compares the server's
// /metrics before and after with what was sent (and checks that no request
// holds cache pages any more), and replays a sample of
// the requests, non-streaming and at a different concurrency, to check
// that each gets the same text: the engine's sampling does not depend on
// the batch, so a request whose tokens got mixed with another's would
// differ. Run stops by itself when every request has finished.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config describes a load run.
type Config struct {
	// URL is the server's base URL, e.g. "http://127.0.0.1:8000".
	URL string
	// Model is the model name to request.
	Model string
	// Concurrency is how many streams are open at once (default 64).
	Concurrency int
	// Requests is how many requests to send in all (default 256).
	Requests int
	// MinTokens and MaxTokens bound each request's max_tokens, drawn
	// uniformly (defaults 8 and 64).
	MinTokens, MaxTokens int
	// Prompts are the prompt texts requests draw from (default: verses of
	// Genesis). Each request takes a random one, cut to a random number
	// of words.
	Prompts []string
	// Seed makes the request mix reproducible.
	Seed uint64
	// Verify is how many requests to replay for the determinism check
	// (default 32; negative: none).
	Verify int
	// CountPrompt, when set, gives the number of prompt tokens the server
	// should report for a prompt; usage.prompt_tokens is checked against it.
	CountPrompt func(prompt string) int
	// Client sends the requests (default: a client with enough idle
	// connections for Concurrency).
	Client *http.Client
}

// Percentiles summarise a latency distribution.
type Percentiles struct {
	N             int
	P50, P90, P99 time.Duration
	Max           time.Duration
}

func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[int(q*float64(len(d)-1)+0.5)] }
	return Percentiles{N: len(d), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: d[len(d)-1]}
}

// Report is the outcome of a load run.
type Report struct {
	Requests, OK int
	// Failures describes the requests that failed a check (the first 20).
	Failures []string
	Failed   int
	// PromptTokens and CompletionTokens add up the responses' usage.
	PromptTokens, CompletionTokens int
	// Wall is the time from the first request to the end of the last.
	Wall time.Duration
	// TTFT is the time from sending a request to its first token; ITL the
	// time between tokens of one stream (a chunk of k tokens counts its
	// gap divided by k, k times), both measured by the client.
	TTFT, ITL Percentiles
	// TokensPerSecond is CompletionTokens over Wall.
	TokensPerSecond float64
	// MetricsChecked says whether /metrics could be read; MetricsMismatches
	// lists what disagreed with what was sent.
	MetricsChecked    bool
	MetricsMismatches []string
	// Verified is how many requests were replayed; VerifyMismatches lists
	// those whose replay differed.
	Verified         int
	VerifyMismatches []string
}

// Passed reports whether every check passed.
func (r *Report) Passed() bool {
	return r.Failed == 0 && r.OK == r.Requests && len(r.MetricsMismatches) == 0 && len(r.VerifyMismatches) == 0
}

// Write prints the report.
func (r *Report) Write(w io.Writer) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	fmt.Fprintf(w, "requests       %d sent, %d ok, %d failed\n", r.Requests, r.OK, r.Failed)
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  failure: %s\n", f)
	}
	fmt.Fprintf(w, "tokens         %d prompt, %d generated\n", r.PromptTokens, r.CompletionTokens)
	fmt.Fprintf(w, "wall time      %s\n", r.Wall.Round(time.Millisecond))
	fmt.Fprintf(w, "throughput     %.1f generated tokens/s, %.2f requests/s\n", r.TokensPerSecond, float64(r.OK)/r.Wall.Seconds())
	fmt.Fprintf(w, "TTFT           p50 %s  p90 %s  p99 %s  max %s  (%d)\n", ms(r.TTFT.P50), ms(r.TTFT.P90), ms(r.TTFT.P99), ms(r.TTFT.Max), r.TTFT.N)
	fmt.Fprintf(w, "inter-token    p50 %s  p90 %s  p99 %s  max %s  (%d)\n", ms(r.ITL.P50), ms(r.ITL.P90), ms(r.ITL.P99), ms(r.ITL.Max), r.ITL.N)
	switch {
	case !r.MetricsChecked:
		fmt.Fprintf(w, "metrics        not checked\n")
	case len(r.MetricsMismatches) == 0:
		fmt.Fprintf(w, "metrics        consistent with what was sent\n")
	default:
		for _, m := range r.MetricsMismatches {
			fmt.Fprintf(w, "metrics        MISMATCH: %s\n", m)
		}
	}
	if len(r.VerifyMismatches) == 0 {
		fmt.Fprintf(w, "replay         %d requests replayed, all identical\n", r.Verified)
	} else {
		for _, m := range r.VerifyMismatches {
			fmt.Fprintf(w, "replay         MISMATCH: %s\n", m)
		}
	}
}

// genesis is the default prompt material (King James Version, public domain).
var genesis = []string{
	"In the beginning God created the heaven and the earth.",
	"And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.",
	"And God said, Let there be light: and there was light.",
	"And God saw the light, that it was good: and God divided the light from the darkness.",
	"And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day.",
	"And God said, Let there be a firmament in the midst of the waters, and let it divide the waters from the waters.",
	"And God made the firmament, and divided the waters which were under the firmament from the waters which were above the firmament: and it was so.",
	"And God called the firmament Heaven. And the evening and the morning were the second day.",
}

// request is one request of the run.
type request struct {
	i         int
	prompt    string
	maxTokens int
	seed      int64
}

// result is what the client saw of one response.
type result struct {
	text             string
	tokens           int
	promptTokens     int
	completionTokens int
	ttft             time.Duration
	gaps             []time.Duration
	err              error
}

func (c *Config) defaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	if c.Requests <= 0 {
		c.Requests = 256
	}
	if c.MinTokens <= 0 {
		c.MinTokens = 8
	}
	if c.MaxTokens < c.MinTokens {
		c.MaxTokens = max(c.MinTokens, 64)
	}
	if len(c.Prompts) == 0 {
		c.Prompts = genesis
	}
	if c.Verify == 0 {
		c.Verify = 32
	}
	if c.Client == nil {
		c.Client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.Concurrency, MaxIdleConns: c.Concurrency}}
	}
	c.URL = strings.TrimSuffix(c.URL, "/")
}

// Run performs the load run. It returns an error only when the run could
// not be carried out; failed checks are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.URL == "" || cfg.Model == "" {
		return nil, errors.New("loadgen: Config.URL and Config.Model are required")
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5bd1e995))
	reqs := make([]request, cfg.Requests)
	for i := range reqs {
		words := strings.Fields(cfg.Prompts[rng.IntN(len(cfg.Prompts))])
		reqs[i] = request{
			i:         i,
			prompt:    strings.Join(words[:1+rng.IntN(len(words))], " "),
			maxTokens: cfg.MinTokens + rng.IntN(cfg.MaxTokens-cfg.MinTokens+1),
			seed:      int64(cfg.Seed)*1_000_003 + int64(i) + 1,
		}
	}

	before, berr := scrape(ctx, cfg.Client, cfg.URL)
	results := make([]result, len(reqs))
	start := time.Now()
	runPool(ctx, cfg.Concurrency, len(reqs), func(i int) { results[i] = stream(ctx, &cfg, reqs[i]) })
	wall := time.Since(start)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	rep := &Report{Requests: len(reqs), Wall: wall}
	var ttft, gaps []time.Duration
	for i, res := range results {
		if res.err != nil {
			rep.Failed++
			if len(rep.Failures) < 20 {
				rep.Failures = append(rep.Failures, fmt.Sprintf("request %d: %v", i, res.err))
			}
			continue
		}
		rep.OK++
		rep.PromptTokens += res.promptTokens
		rep.CompletionTokens += res.completionTokens
		ttft = append(ttft, res.ttft)
		gaps = append(gaps, res.gaps...)
	}
	rep.TTFT, rep.ITL = percentiles(ttft), percentiles(gaps)
	rep.TokensPerSecond = float64(rep.CompletionTokens) / wall.Seconds()

	if berr == nil {
		rep.MetricsChecked = true
		rep.MetricsMismatches = checkMetrics(ctx, &cfg, before, rep)
	}
	if cfg.Verify > 0 {
		rep.Verified, rep.VerifyMismatches = replay(ctx, &cfg, reqs, results, rng)
	}
	return rep, nil
}

// runPool calls f(0..n-1) from workers goroutines.
func runPool(ctx context.Context, workers, n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
}

func body(cfg *Config, r request, stream bool) []byte {
	b := map[string]any{
		"model": cfg.Model, "prompt": r.prompt, "max_tokens": r.maxTokens, "seed": r.seed,
		"temperature": 1.0, "ignore_eos": true, "skip_special_tokens": false,
	}
	if stream {
		b["stream"] = true
		b["stream_options"] = map[string]any{"include_usage": true}
		b["logprobs"] = 0
	}
	data, _ := json.Marshal(b)
	return data
}

// chunk is one event of a completions stream (or a whole response).
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		Logprobs *struct {
			Tokens []string `json:"tokens"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func post(ctx context.Context, cfg *Config, data []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL+"/v1/completions", bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	return resp, nil
}

// stream sends one streaming request and checks its events.
func stream(ctx context.Context, cfg *Config, r request) (res result) {
	sent := time.Now()
	resp, err := post(ctx, cfg, body(cfg, r, true))
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		res.err = fmt.Errorf("content type %q, want text/event-stream", ct)
		return res
	}
	fail := func(format string, args ...any) result {
		res.err = fmt.Errorf(format, args...)
		return res
	}
	var text strings.Builder
	var id, finish string
	var usage *chunk
	done := false
	last := sent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return fail("unexpected line %.60q", line)
		}
		if done {
			return fail("event after [DONE]: %.60q", data)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		now := time.Now()
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return fail("bad event %.60q: %v", data, err)
		}
		if c.Error != nil {
			return fail("error event: %s", c.Error.Message)
		}
		if id == "" {
			id = c.ID
		}
		if c.ID != id || c.Object != "text_completion" {
			return fail("event with id %q object %q in stream %q", c.ID, c.Object, id)
		}
		if c.Usage != nil {
			if usage != nil || len(c.Choices) != 0 {
				return fail("a second usage event, or usage with choices")
			}
			usage = &c
			continue
		}
		if usage != nil {
			return fail("event after the usage event")
		}
		if len(c.Choices) != 1 || c.Choices[0].Index != 0 {
			return fail("event with %d choices (want one, index 0)", len(c.Choices))
		}
		ch := c.Choices[0]
		if finish != "" {
			return fail("event after finish_reason %q", finish)
		}
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
		text.WriteString(ch.Text)
		if ch.Logprobs == nil {
			return fail("event without logprobs")
		}
		if k := len(ch.Logprobs.Tokens); k > 0 {
			if res.tokens == 0 {
				res.ttft = now.Sub(sent)
			} else {
				for range k {
					res.gaps = append(res.gaps, now.Sub(last)/time.Duration(k))
				}
			}
			res.tokens += k
			last = now
		}
	}
	if err := sc.Err(); err != nil {
		return fail("reading the stream: %v", err)
	}
	switch {
	case !done:
		return fail("stream ended without [DONE]")
	case usage == nil:
		return fail("no usage event")
	case finish != "length":
		return fail("finish_reason %q, want length (ignore_eos)", finish)
	case res.tokens != r.maxTokens:
		return fail("streamed %d tokens, want max_tokens %d", res.tokens, r.maxTokens)
	case usage.Usage.CompletionTokens != res.tokens:
		return fail("usage.completion_tokens %d but %d tokens streamed", usage.Usage.CompletionTokens, res.tokens)
	case usage.Usage.TotalTokens != usage.Usage.PromptTokens+usage.Usage.CompletionTokens:
		return fail("usage total %d is not prompt %d + completion %d", usage.Usage.TotalTokens, usage.Usage.PromptTokens, usage.Usage.CompletionTokens)
	case cfg.CountPrompt != nil && usage.Usage.PromptTokens != cfg.CountPrompt(r.prompt):
		return fail("usage.prompt_tokens %d, want %d", usage.Usage.PromptTokens, cfg.CountPrompt(r.prompt))
	}
	res.text = text.String()
	res.promptTokens = usage.Usage.PromptTokens
	res.completionTokens = usage.Usage.CompletionTokens
	return res
}

// replay sends a sample of the requests again, non-streaming, from fewer
// clients and in another order, and compares the texts.
func replay(ctx context.Context, cfg *Config, reqs []request, results []result, rng *rand.Rand) (int, []string) {
	var sample []int
	for _, i := range rng.Perm(len(reqs)) {
		if results[i].err == nil && len(sample) < cfg.Verify {
			sample = append(sample, i)
		}
	}
	var mu sync.Mutex
	var bad []string
	runPool(ctx, max(1, cfg.Concurrency/8), len(sample), func(k int) {
		i := sample[k]
		text, n, err := complete(ctx, cfg, reqs[i])
		msg := ""
		switch {
		case err != nil:
			msg = fmt.Sprintf("request %d: replay failed: %v", i, err)
		case n != results[i].completionTokens:
			msg = fmt.Sprintf("request %d: replay generated %d tokens, the stream %d", i, n, results[i].completionTokens)
		case text != results[i].text:
			msg = fmt.Sprintf("request %d: replay text %.40q differs from the streamed %.40q", i, text, results[i].text)
		}
		if msg != "" {
			mu.Lock()
			bad = append(bad, msg)
			mu.Unlock()
		}
	})
	return len(sample), bad
}

// complete sends one non-streaming request.
func complete(ctx context.Context, cfg *Config, r request) (string, int, error) {
	resp, err := post(ctx, cfg, body(cfg, r, false))
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var c chunk
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return "", 0, err
	}
	if len(c.Choices) != 1 || c.Usage == nil {
		return "", 0, fmt.Errorf("response with %d choices, usage %v", len(c.Choices), c.Usage != nil)
	}
	return c.Choices[0].Text, c.Usage.CompletionTokens, nil
}

// scrape reads the server's /metrics as "name{labels}" -> value.
func scrape(ctx context.Context, client *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads Prometheus text exposition into "name{labels}" ->
// value, labels as the server wrote them.
func ParseMetrics(r io.Reader) (map[string]float64, error) {
	m := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("metrics line %q has no value", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// checkMetrics compares the server's counters with what the run sent.
func checkMetrics(ctx context.Context, cfg *Config, before map[string]float64, rep *Report) []string {
	var after map[string]float64
	var err error
	// The engine frees a request's pages before its stream ends, so the
	// gauges should be idle at once; allow a moment for a busy scrape.
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, err = scrape(ctx, cfg.Client, cfg.URL)
		if err != nil {
			return []string{fmt.Sprintf("scraping /metrics after the run: %v", err)}
		}
		if after["strata_running_requests"] == 0 && after["strata_queue_depth"] == 0 || time.Now().After(deadline) {
			break
		}
		select { // the server's gauges can only be polled over HTTP
		case <-ctx.Done():
			return []string{fmt.Sprintf("waiting for the server to go idle after the run: %v", ctx.Err())}
		case <-time.After(20 * time.Millisecond):
		}
	}
	var bad []string
	delta := func(name string, want float64) {
		if got := after[name] - before[name]; got != want {
			bad = append(bad, fmt.Sprintf("%s rose by %g, want %g", name, got, want))
		}
	}
	delta(`strata_requests_total{endpoint="/v1/completions",status="200"}`, float64(rep.OK))
	delta("strata_prompt_tokens_total", float64(rep.PromptTokens))
	delta("strata_generation_tokens_total", float64(rep.CompletionTokens))
	delta("strata_time_to_first_token_seconds_count", float64(rep.OK))
	delta("strata_inter_token_latency_seconds_count", float64(rep.CompletionTokens-rep.OK))
	for _, g := range []string{"strata_running_requests", "strata_queue_depth"} {
		if after[g] != 0 {
			bad = append(bad, fmt.Sprintf("%s is %g after the run, want 0", g, after[g]))
		}
	}
	// Every page still used belongs to the prefix cache, none to a request.
	used := 0.0
	for k, v := range after {
		if strings.HasPrefix(k, "strata_cache_pages_used{") {
			used += v
		}
	}
	if prefix, ok := after["strata_prefix_cache_pages"]; ok && used != prefix {
		bad = append(bad, fmt.Sprintf("strata_cache_pages_used adds up to %g after the run, but the prefix cache holds %g", used, prefix))
	}
	return bad
}
