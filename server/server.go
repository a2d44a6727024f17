package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/tokenizer"
)

// Options configure a Server.
type Options struct {
	// ModelName is the name clients pass as "model" and GET /v1/models
	// lists. Required.
	ModelName string
	// MaxBodyBytes bounds a request body; larger ones get 413 (default 8 MiB).
	MaxBodyBytes int64
	// MaxContext bounds prompt plus generated tokens of one request (the
	// model's max_position_embeddings, typically). The cache pool bounds it
	// further: a request must fit the whole pool. 0: only the pool bounds it.
	MaxContext int
	// DefaultMaxTokens caps the tokens a chat choice generates when the
	// request gives neither max_tokens nor max_completion_tokens
	// (0: the rest of the context). /v1/completions defaults to 16, as
	// OpenAI's does.
	DefaultMaxTokens int
	// EndTokens end every reply as the engine's EOS does, unless the
	// request ignores EOS: a model's other end-of-turn tokens
	// (generation_config.json's eos_token_id list beyond the first, such
	// as Gemma's <turn|>). They are added to each request's stop tokens.
	EndTokens []int32
	// MaxChoices bounds the engine requests one HTTP request may start:
	// n, times the number of prompts for /v1/completions (default 16).
	MaxChoices int
	// Logger receives the access log and errors (default slog.Default()).
	Logger *slog.Logger
	// DecodeURL makes this server a prefill worker: each request's prompt
	// and first token run here, then the request's state goes to the decode
	// worker at this base URL, which generates the rest.
	DecodeURL string
	// AcceptHandoff makes this server a decode worker: it serves POST
	// /internal/handoff, resuming states prefill workers send.
	AcceptHandoff bool
	// MaxHandoffs bounds the states a decode worker reads at the same time
	// (default 4); more are answered 503 with Retry-After.
	MaxHandoffs int
	// APIKey, when set, is required of every request (but those to
	// PublicPaths): as "Authorization: Bearer <key>" or, as Anthropic's
	// clients send it, "x-api-key: <key>". Others get 401. A prefill worker
	// sends it to its decode worker.
	APIKey string
	// PublicPaths are served without the API key (strata serve: /health
	// and /metrics unless told otherwise).
	PublicPaths []string
	// KeepAlive is how long an event stream may stay quiet (a long prefill)
	// before the server sends a keep-alive: an SSE comment, or Anthropic's
	// ping event. 0: 15 s; negative: never.
	KeepAlive time.Duration
	// MaxStoredResponses bounds the Responses API's store (responses kept
	// for GET /v1/responses/{id} and previous_response_id), oldest evicted
	// first. 0: 1024; negative: nothing is stored.
	MaxStoredResponses int
}

// Server is the OpenAI-compatible HTTP API in front of an engine. It is an
// http.Handler; the engine must be running (Engine.Run) for requests to
// make progress.
type Server struct {
	eng        *engine.Engine
	tok        *tokenizer.Tokenizer
	format     ChatFormat
	opt        Options
	log        *slog.Logger
	mux        *http.ServeMux
	metrics    *metrics
	maxContext int
	created    int64

	// submitHook, when set (by tests), may change each engine request just
	// before it is submitted.
	submitHook func(*engine.Request)
	client     *http.Client    // to the decode worker
	structured structuredCache // compiled grammars of structured output (structured.go)
	eos        int32           // the engine's EOS
	// ends are the tokens besides EOS that end every reply: Options'
	// EndTokens and the format's end markers (EndMarkers).
	ends []int32
	// aborted ends when Abort is called; every generation's context
	// follows it, with cause errShuttingDown.
	aborted context.Context
	abort   context.CancelFunc
	store   *responseStore
	health  decodeHealth // a prefill worker's view of its decode worker
	// handoffs bounds the states a decode worker reads at once.
	handoffs chan struct{}
}

// New returns a server for eng, whose model tok tokenizes and format
// renders chats for.
func New(eng *engine.Engine, tok *tokenizer.Tokenizer, format ChatFormat, opt Options) (*Server, error) {
	if opt.ModelName == "" {
		return nil, errors.New("server: Options.ModelName is required")
	}
	if eng == nil || tok == nil || format == nil {
		return nil, errors.New("server: an engine, a tokenizer and a chat format are required")
	}
	if v := eng.Model().VocabSize(); tok.VocabSize() > v {
		return nil, fmt.Errorf("server: the tokenizer has %d ids but the model only %d", tok.VocabSize(), v)
	}
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = 8 << 20
	}
	if opt.MaxChoices <= 0 {
		opt.MaxChoices = 16
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.KeepAlive == 0 {
		opt.KeepAlive = 15 * time.Second
	}
	if opt.MaxStoredResponses == 0 {
		opt.MaxStoredResponses = 1024
	}
	s := &Server{
		eng:     eng,
		tok:     tok,
		format:  format,
		opt:     opt,
		log:     opt.Logger,
		mux:     http.NewServeMux(),
		metrics: newMetrics(eng),
		created: time.Now().Unix(),
		client:  &http.Client{},
		eos:     eng.EOS(),
		store:   newResponseStore(opt.MaxStoredResponses),
	}
	if opt.MaxHandoffs <= 0 {
		opt.MaxHandoffs = 4
	}
	s.opt.MaxHandoffs = opt.MaxHandoffs
	s.ends = slices.Clone(opt.EndTokens)
	if f, ok := format.(EndMarkers); ok {
		for _, m := range f.ReplyEndMarkers() {
			ids := tok.Encode(m, true)
			if len(ids) != 1 {
				s.log.Warn("the tokenizer does not hold the chat format's end marker as one token; replies do not stop at it", "marker", m, "tokens", len(ids))
				continue
			}
			if ids[0] != s.eos && !slices.Contains(s.ends, ids[0]) {
				s.ends = append(s.ends, ids[0])
			}
		}
	}
	s.handoffs = make(chan struct{}, opt.MaxHandoffs)
	s.aborted, s.abort = context.WithCancel(context.Background())
	s.maxContext = contextFor(eng, opt.MaxContext)
	if s.maxContext < 2 {
		return nil, fmt.Errorf("server: the cache pool of %d pages cannot hold even a one-token prompt and one generated token", eng.Pool().NumPages())
	}
	s.routes()
	return s, nil
}

// contextFor is the longest context (prompt plus generated tokens) a
// request can have: at most limit (when positive), and no more than the
// whole pool holds, as Engine.Submit checks it.
func contextFor(eng *engine.Engine, limit int) int {
	hi := 1 << 30
	if limit > 0 {
		hi = limit
	}
	fits := func(total int) bool { return eng.PagesFor(total-1) <= eng.Pool().NumPages() }
	if fits(hi) {
		return hi
	}
	lo := 0 // fits(lo) or lo == 0
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// MaxContext is the longest prompt plus generation a request may have.
func (s *Server) MaxContext() int { return s.maxContext }

func (s *Server) routes() {
	routes := []struct {
		method, path string
		h            http.HandlerFunc
	}{
		{"POST", "/v1/chat/completions", s.handleChat},
		{"POST", "/v1/completions", s.handleCompletions},
		{"POST", "/v1/messages", s.handleMessages},
		{"POST", "/v1/messages/count_tokens", s.handleCountTokens},
		{"POST", "/v1/responses", s.handleResponses},
		{"GET", "/v1/responses/{id}", s.handleGetResponse},
		{"DELETE", "/v1/responses/{id}", s.handleDeleteResponse},
		{"POST", "/tokenize", s.handleTokenize},
		{"POST", "/detokenize", s.handleDetokenize},
		{"GET", "/v1/models", s.handleModels},
		{"GET", "/v1/models/{model...}", s.handleModel},
		{"GET", "/health", s.handleHealth},
		{"GET", "/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)}).ServeHTTP},
	}
	if s.opt.AcceptHandoff {
		routes = append(routes, struct {
			method, path string
			h            http.HandlerFunc
		}{"POST", handoffPath, s.handleHandoff})
	}
	allow := map[string][]string{}
	for _, rt := range routes {
		s.mux.HandleFunc(rt.method+" "+rt.path, rt.h)
		if rt.method == "GET" {
			allow[rt.path] = append(allow[rt.path], "GET", "HEAD")
		} else {
			allow[rt.path] = append(allow[rt.path], rt.method)
		}
	}
	for path, methods := range allow {
		s.mux.HandleFunc(path, s.methodNotAllowed(strings.Join(methods, ", ")))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		e := &apiError{Status: http.StatusNotFound, Type: typeNotFound, Code: "unknown_url",
			Message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path)}
		if isAnthropicPath(r.URL.Path) {
			writeAnthropicError(w, e)
			return
		}
		writeError(w, e)
	})
}

func (s *Server) methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		e := &apiError{Status: http.StatusMethodNotAllowed, Type: typeInvalidRequest, Code: "method_not_allowed",
			Message: fmt.Sprintf("%s %s is not allowed; use %s.", r.Method, r.URL.Path, allow)}
		if isAnthropicPath(r.URL.Path) {
			writeAnthropicError(w, e)
			return
		}
		writeError(w, e)
	}
}

// ServeHTTP serves the API, counting every request in the metrics and
// logging it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 128 {
		id = newID("req-")
	}
	w.Header().Set("X-Request-Id", id)
	info := &requestInfo{}
	rec := &recorder{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
	if s.authorized(r) {
		s.mux.ServeHTTP(rec, r)
	} else {
		s.unauthorized(rec, r)
	}

	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	if info.clientGone && !rec.wrote {
		status = 499 // the client went away before anything was sent, as nginx logs it
	}
	endpoint := "other"
	if _, path, ok := strings.Cut(r.Pattern, " "); ok && r.Pattern != "" {
		endpoint = path
	} else if r.Pattern != "" && r.Pattern != "/" {
		endpoint = r.Pattern
	}
	elapsed := time.Since(start)
	s.metrics.requests.WithLabelValues(endpoint, fmt.Sprint(status)).Inc()
	s.metrics.duration.WithLabelValues(endpoint).Observe(elapsed.Seconds())

	level := slog.LevelInfo
	if endpoint == "/health" || endpoint == "/metrics" {
		level = slog.LevelDebug
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("id", id),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Int64("bytes", rec.bytes),
		slog.Duration("duration", elapsed),
		slog.String("remote", r.RemoteAddr),
	}
	attrs = append(attrs, info.attrs...)
	s.log.LogAttrs(r.Context(), level, "request", attrs...)
}

// requestInfo collects what a handler wants in the access log line.
type requestInfo struct {
	attrs      []slog.Attr
	clientGone bool
}

type requestInfoKey struct{}

func infoOf(ctx context.Context) *requestInfo {
	if i, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return i
	}
	return &requestInfo{}
}

// recorder notes the status and size of a response. Unwrap lets
// http.ResponseController reach the connection to flush it.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.wrote = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// readBody reads the request body, at most Options.MaxBodyBytes of it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	tooLarge := &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large",
		Message: fmt.Sprintf("The request body is larger than the limit of %d bytes.", s.opt.MaxBodyBytes)}
	if r.ContentLength > s.opt.MaxBodyBytes {
		return nil, tooLarge
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, tooLarge
		}
		return nil, invalidf("", "invalid_body", "Reading the request body failed: %v.", err)
	}
	return data, nil
}

type modelJSON struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
}

func (s *Server) model() modelJSON {
	return modelJSON{ID: s.opt.ModelName, Object: "model", Created: s.created, OwnedBy: "strata", MaxModelLen: s.maxContext}
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelJSON{s.model()}})
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	if name := r.PathValue("model"); name != s.opt.ModelName {
		writeError(w, modelNotFound(name, s.opt.ModelName))
		return
	}
	writeJSON(w, http.StatusOK, s.model())
}

// newID returns prefix followed by 26 random characters.
func newID(prefix string) string { return prefix + strings.ToLower(rand.Text()) }
