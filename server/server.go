package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	}
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
	s.mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	s.mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /v1/models/{model...}", s.handleModel)
	s.mux.HandleFunc("GET /health", s.handleHealth)
	if s.opt.AcceptHandoff {
		s.mux.HandleFunc("POST "+handoffPath, s.handleHandoff)
	}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)}))
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"} {
		s.mux.HandleFunc(path, s.methodNotAllowed)
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: typeNotFound, Code: "unknown_url",
			Message: fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path)})
	})
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	allow := "POST"
	if !strings.Contains(r.URL.Path, "completions") {
		allow = "GET, HEAD"
	}
	w.Header().Set("Allow", allow)
	writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: typeInvalidRequest, Code: "method_not_allowed",
		Message: fmt.Sprintf("%s %s is not allowed; use %s.", r.Method, r.URL.Path, allow)})
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
	s.mux.ServeHTTP(rec, r)

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

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// newID returns prefix followed by 26 random characters.
func newID(prefix string) string { return prefix + strings.ToLower(rand.Text()) }
