package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/engine"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/model/deepseekv32"
	"github.com/strata-inference/strata/model/deepseekv4"
	"github.com/strata-inference/strata/model/gemma4"
	"github.com/strata-inference/strata/model/glm5"
	"github.com/strata-inference/strata/server"
	"github.com/strata-inference/strata/tokenizer"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// serveConfig is what it takes to stand up a server on a model folder.
type serveConfig struct {
	dir              string
	name             string // served model name ("": the folder's name)
	maxSeqs          int
	maxQueue         int
	batchTokens      int
	stepTarget       time.Duration
	cacheDType       string
	cachePages       int
	cacheMemory      int64 // used when cachePages is 0
	maxBody          int64
	maxContext       int
	defaultMaxTokens int
	maxChoices       int
	threads          int
	device           string
	gpus, ranks      int    // several ranks (multigpu.go)
	chatFormat       string // "auto", "deepseek-v4", "deepseek-v3.2", "glm", "gemma4" or "jinja"
	chatTemplate     string // a Jinja chat template file (implies jinja)
	apiKey           string
	publicPaths      string // comma-separated paths served without the API key
	keepAlive        time.Duration
	storedResponses  int
	role             string // "both", "prefill" or "decode"
	decodeURL        string // prefill role: the decode worker
	speculation      string // "off", "mtp" or "ngram"
	maxDraft         int
	noPrefixCache    bool
	maxHandoffs      int
}

// served is a loaded model with its engine and HTTP handler.
type served struct {
	model model.Model
	eng   *engine.Engine
	srv   *server.Server
	tok   *tokenizer.Tokenizer
	name  string
}

func (s *served) Close() error { return s.model.Close() }

// loadServed loads the model and tokenizer in cfg.dir and builds the
// engine and the server.
func loadServed(cfg serveConfig, log *slog.Logger) (*served, error) {
	dt, err := cache.ParseDType(cfg.cacheDType)
	if err != nil {
		return nil, err
	}
	m, err := openServedModel(cfg, model.Options{CacheDType: dt}) // multigpu.go: one backend or several ranks
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	// Fault the weights in now rather than during the first requests.
	if p, ok := m.(model.Prefaulter); ok {
		if err := p.Prefault(context.Background()); err != nil {
			return nil, err
		}
	}
	info := m.Info()
	tok, err := tokenizer.LoadDir(cfg.dir)
	if err != nil {
		return nil, fmt.Errorf("the server needs the model's tokenizer: %w", err)
	}
	if e := tok.EOS(); e >= 0 && e != info.EOS {
		log.Warn("the tokenizer's EOS differs from the model's; the engine stops at the model's", "tokenizer_eos", e, "model_eos", info.EOS)
	}
	format, err := chatFormat(cfg.chatFormat, cfg.chatTemplate, cfg.dir, info.Arch)
	if err != nil {
		return nil, err
	}
	pageBytes := cache.PageBytesFor(m.CacheSpecs())
	pages := cfg.cachePages
	if pages <= 0 {
		pages = int(cfg.cacheMemory / int64(pageBytes))
	}
	if pages <= 0 {
		return nil, fmt.Errorf("a cache of %d bytes holds no page of %d bytes", cfg.cacheMemory, pageBytes)
	}
	switch cfg.role {
	case "both", "decode":
	case "prefill":
		if cfg.decodeURL == "" {
			return nil, fmt.Errorf("-role prefill needs -decode-url, the decode worker's base URL")
		}
	default:
		return nil, fmt.Errorf("-role %q: want both, prefill or decode", cfg.role)
	}
	if cfg.speculation == "off" {
		cfg.speculation = ""
	}
	eng, err := engine.New(m, engine.Config{
		MaxBatchTokens: cfg.batchTokens,
		StepTarget:     cfg.stepTarget,
		MaxSeqs:        cfg.maxSeqs,
		Pages:          pages,
		MaxContext:     info.MaxContext,
		EOS:            info.EOS,
		Logger:         log,
		Speculation:    engine.Speculation{Method: cfg.speculation, MaxDraft: cfg.maxDraft},
		NoPrefixCache:  cfg.noPrefixCache,
	})
	if err != nil {
		return nil, err
	}
	if cfg.maxQueue > 0 {
		eng.SetMaxQueue(cfg.maxQueue)
	}
	name := cfg.name
	if name == "" {
		abs, _ := filepath.Abs(cfg.dir)
		name = filepath.Base(abs)
	}
	maxContext := info.MaxContext
	if cfg.maxContext > 0 {
		maxContext = min(maxContext, cfg.maxContext)
		// The pool must hold one request of the asked context, or every
		// long request would fail.
		if need := eng.PagesFor(maxContext - 1); need > pages {
			return nil, fmt.Errorf("-max-context %d needs %d cache pages of %d bytes (%s) for one request; the cache holds %d pages (%s): raise -cache-memory (or -cache-pages) or lower -max-context",
				maxContext, need, pageBytes, formatBytes(int64(need)*int64(pageBytes)), pages, formatBytes(int64(pages)*int64(pageBytes)))
		}
	}
	var public []string
	for _, p := range strings.Split(cfg.publicPaths, ",") {
		if p = strings.TrimSpace(p); p != "" {
			public = append(public, p)
		}
	}
	ends, err := endTokens(cfg.dir, info.EOS)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(eng, tok, format, server.Options{
		ModelName:          name,
		EndTokens:          ends,
		MaxBodyBytes:       cfg.maxBody,
		MaxContext:         maxContext,
		DefaultMaxTokens:   cfg.defaultMaxTokens,
		MaxChoices:         cfg.maxChoices,
		Logger:             log,
		AcceptHandoff:      cfg.role == "decode",
		MaxHandoffs:        cfg.maxHandoffs,
		DecodeURL:          map[bool]string{true: cfg.decodeURL}[cfg.role == "prefill"],
		APIKey:             cfg.apiKey,
		PublicPaths:        public,
		KeepAlive:          positiveOr(cfg.keepAlive, -1),
		MaxStoredResponses: positiveOr(cfg.storedResponses, -1),
	})
	if err != nil {
		return nil, err
	}
	if cfg.maxContext <= 0 && srv.MaxContext() < info.MaxContext {
		log.Warn("the cache pool bounds the context below the model's; raise -cache-memory for longer requests", "max_context", srv.MaxContext(), "model_max_context", info.MaxContext)
	}
	log.Info("model loaded", "model", cfg.dir, "name", name, "architecture", info.Arch, "layers", info.Layers, "hidden", info.Hidden,
		"vocab", m.VocabSize(), "chat_format", format.Name(), "cache_pages", pages, "page_bytes", pageBytes, "cache_dtype", cfg.cacheDType,
		"cache_bytes", int64(pages)*int64(pageBytes), "max_context", srv.MaxContext(),
		"max_concurrency", cfg.maxSeqs, "max_queue", cfg.maxQueue, "batch_tokens", cfg.batchTokens, "step_target", cfg.stepTarget,
		"role", cfg.role, "speculation", cfg.speculation, "prefix_cache", !cfg.noPrefixCache)
	ok = true
	return &served{model: m, eng: eng, srv: srv, tok: tok, name: name}, nil
}

// chatFormat picks how chats become prompts: a family's own encoding
// (DeepSeek-V4's, DeepSeek-V3.2's) or a Jinja chat template: the file
// template when given, else the one the model ships (chat_template.jinja,
// else tokenizer_config.json's chat_template). "auto" picks by the model's
// architecture. The replies to a Jinja template are read by the
// architecture's parser where it has one (jinjaFormat); "glm" forces GLM's.
func chatFormat(name, template, dir, arch string) (server.ChatFormat, error) {
	if template != "" {
		if name != "" && name != "auto" && name != "jinja" && name != "glm" {
			return nil, fmt.Errorf("-chat-template is a Jinja template; it does not go with -chat-format %s", name)
		}
		src, err := os.ReadFile(template)
		if err != nil {
			return nil, fmt.Errorf("-chat-template: %w", err)
		}
		t, err := chat.NewTemplate(string(src))
		if err != nil {
			return nil, fmt.Errorf("-chat-template %s: %w", template, err)
		}
		if name == "glm" {
			return server.GLM(t), nil
		}
		return jinjaFormat(arch, t), nil
	}
	if name == "auto" || name == "" {
		switch arch {
		case deepseekv4.Arch.Name:
			name = "deepseek-v4"
		case deepseekv32.Arch.Name:
			name = "deepseek-v3.2"
		case glm5.Arch.Name:
			name = "glm"
		case gemma4.Arch.Name:
			name = "gemma4"
		default:
			name = "jinja"
		}
	}
	switch name {
	case "deepseek-v4":
		return server.DeepSeekV4(), nil
	case "gemma4":
		t, err := loadTemplate(name, dir)
		if err != nil {
			return nil, err
		}
		return server.Gemma4(t)
	case "deepseek-v3.2":
		return server.DeepSeekV32(), nil
	case "jinja", "glm":
		t, err := loadTemplate(name, dir)
		if err != nil {
			return nil, err
		}
		if name == "glm" {
			return server.GLM(t), nil
		}
		return jinjaFormat(arch, t), nil
	}
	return nil, fmt.Errorf("-chat-format %q: want auto, deepseek-v4, deepseek-v3.2, glm, gemma4 or jinja", name)
}

// loadTemplate compiles the chat template of the model folder dir for
// -chat-format name.
func loadTemplate(name, dir string) (*chat.Template, error) {
	if src, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		t, err := chat.NewTemplate(string(src))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "chat_template.jinja"), err)
		}
		return t, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, fmt.Errorf("-chat-format %s: %s has no chat_template.jinja and no tokenizer_config.json", name, dir)
	}
	t, err := chat.NewTemplateFromConfig(data)
	if err != nil {
		return nil, fmt.Errorf("-chat-format %s: %s: %w", name, dir, err)
	}
	return t, nil
}

// endTokens are the end-of-turn tokens of dir/generation_config.json's
// eos_token_id (a number or a list) other than eos, the model's own; none
// when the file is absent.
func endTokens(dir string, eos int32) ([]int32, error) {
	path := filepath.Join(dir, "generation_config.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var g struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var ids []int32
	if len(g.EOS) == 0 || string(g.EOS) == "null" {
		return nil, nil
	}
	var one int32
	if err := json.Unmarshal(g.EOS, &one); err == nil {
		ids = []int32{one}
	} else if err := json.Unmarshal(g.EOS, &ids); err != nil {
		return nil, fmt.Errorf("%s: eos_token_id %.40s is not a token id or a list of them", path, g.EOS)
	}
	var out []int32
	for _, id := range ids {
		if id != eos && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// addServeFlags registers the flags that size the engine and the server.
func addServeFlags(fs *flag.FlagSet, cfg *serveConfig) {
	fs.StringVar(&cfg.dir, "model", defaultModel, "model folder: config.json, safetensors, tokenizer.json")
	fs.IntVar(&cfg.maxSeqs, "max-concurrency", 64, "most requests the engine runs at once (sequences in one step)")
	fs.IntVar(&cfg.maxQueue, "max-queue", 256, "most requests waiting for the engine; beyond it requests get 503")
	fs.IntVar(&cfg.batchTokens, "batch-tokens", 512, "token budget of one engine step (decode tokens plus prefill chunks)")
	fs.StringVar(&cfg.cacheDType, "cache-dtype", "f32", "how the cache stores KV and compressed entries and indexer keys: f32 (exact), bf16, or fp8 (DeepSeek's 584-byte layout; the handbook's ledger); state overwritten as requests decode stays f32")
	fs.DurationVar(&cfg.stepTarget, "step-target", 100*time.Millisecond, "schedule for latency: decodes first, each step's prompt tokens sized by the measured step cost to take about this long and shared between prompts (0: first come, first served, -batch-tokens per step)")
	fs.IntVar(&cfg.cachePages, "cache-pages", 0, "cache pool pages (0: as many as -cache-memory holds)")
	fs.Func("cache-memory", "cache pool size when -cache-pages is 0, e.g. 512MiB, 2GiB (default 1GiB)", func(s string) error {
		n, err := parseBytes(s)
		cfg.cacheMemory = n
		return err
	})
	fs.Func("max-body", "largest request body, e.g. 8MiB (default 8MiB); larger ones get 413", func(s string) error {
		n, err := parseBytes(s)
		cfg.maxBody = n
		return err
	})
	fs.IntVar(&cfg.maxContext, "max-context", 0, "most prompt plus generated tokens of one request (0: the model's max_position_embeddings; the pool bounds it too)")
	fs.IntVar(&cfg.defaultMaxTokens, "default-max-tokens", 4096, "tokens a chat choice may generate when the request sets no max_tokens (0: the rest of the context)")
	fs.IntVar(&cfg.maxChoices, "max-choices", 16, "most choices (n, times prompts for /v1/completions) in one request")
	fs.IntVar(&cfg.threads, "threads", 0, "compute goroutines (0: one per CPU)")
	addDeviceFlag(fs, &cfg.device)
	addParallelFlags(fs, cfg)
	fs.StringVar(&cfg.role, "role", "both", "both: serve requests whole; prefill: run prompts and first tokens here and hand requests to -decode-url; decode: also accept requests handed off by prefill workers (POST /internal/handoff)")
	fs.StringVar(&cfg.decodeURL, "decode-url", "", "with -role prefill: the decode worker's base URL, e.g. http://127.0.0.1:8001")
	fs.StringVar(&cfg.speculation, "speculation", "off", "speculative decoding: off, mtp (the checkpoint's MTP layer) or ngram (prompt lookup)")
	fs.IntVar(&cfg.maxDraft, "max-draft", 4, "with -speculation: most tokens drafted per step (the engine adapts below it)")
	fs.BoolVar(&cfg.noPrefixCache, "no-prefix-cache", false, "turn off prefix caching")
	fs.IntVar(&cfg.maxHandoffs, "max-handoffs", 4, "with -role decode: the most request states read at once (more wait with 503)")
	fs.StringVar(&cfg.chatFormat, "chat-format", "auto", "how chats become prompts: auto (by the model's architecture), deepseek-v4 or deepseek-v3.2 (the family's own encoding, with reasoning and DSML tool calls), glm (the model's chat template with GLM's reasoning and tool-call parsing), gemma4 (Gemma 4's chat template, with its thought channel and tool calls read back) or jinja (the tokenizer's chat template; the architecture's replies read for reasoning and tool calls where it has a parser)")
	fs.StringVar(&cfg.chatTemplate, "chat-template", "", "a Jinja chat template `file` to render chats with (instead of the model's; implies -chat-format jinja)")
	cfg.cacheMemory = 1 << 30
	cfg.maxBody = 8 << 20
}

// positiveOr is v when positive, else none (server.Options reads 0 as its
// default, the flags as "off").
func positiveOr[T int | time.Duration](v, none T) T {
	if v > 0 {
		return v
	}
	return none
}

// formatBytes writes a size in binary units, as parseBytes reads them.
func formatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			return strconv.FormatFloat(float64(n)/float64(u.size), 'f', 1, 64) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// parseBytes reads a size: a number of bytes with an optional unit (KiB,
// MiB, GiB, TiB, or KB, MB, GB, TB; K, M, G, T are binary).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("%q is not a size like 512MiB or 2GiB", s)
	}
	return int64(v * float64(mult)), nil
}

func runServe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var cfg serveConfig
	addServeFlags(fs, &cfg)
	addr := fs.String("addr", "127.0.0.1:8000", "address to listen on")
	fs.StringVar(&cfg.name, "served-model-name", "", "model name clients use (default: the model folder's name)")
	drain := fs.Duration("drain-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long running requests may take to finish before they are ended with an error (0: no limit)")
	fs.StringVar(&cfg.apiKey, "api-key", os.Getenv("STRATA_API_KEY"), "require this key of every request (Authorization: Bearer <key>, or x-api-key: <key>); default $STRATA_API_KEY")
	fs.StringVar(&cfg.publicPaths, "public-paths", "/health,/metrics", "comma-separated paths served without the API key (\"\": none)")
	fs.DurationVar(&cfg.keepAlive, "keep-alive", 15*time.Second, "send a keep-alive on an event stream quiet for this long (a long prefill); 0 or negative: never")
	fs.IntVar(&cfg.storedResponses, "max-stored-responses", 1024, "responses the Responses API keeps in memory for GET /v1/responses/{id} and previous_response_id (0: none)")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: strata serve [flags]\n\n"+
			"Serves a model over HTTP: OpenAI's POST /v1/chat/completions, /v1/completions and\n"+
			"/v1/responses (GET and DELETE /v1/responses/{id}), Anthropic's POST /v1/messages and\n"+
			"/v1/messages/count_tokens, POST /tokenize and /detokenize, GET /v1/models, GET /health,\n"+
			"GET /metrics (Prometheus). SIGTERM or SIGINT stops accepting requests, lets running\n"+
			"ones finish (see -drain-timeout; then they end with an error) and exits 0.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	s, err := loadServed(cfg, log)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	engCtx, stopEngine := context.WithCancel(context.Background())
	engDone := make(chan struct{})
	go func() {
		s.eng.Run(engCtx)
		close(engDone)
	}()
	go func() {
		<-ctx.Done()
		// A second signal ends the process at once.
		signal.Reset(os.Interrupt, syscall.SIGTERM)
	}()
	log.Info("serving", "addr", "http://"+ln.Addr().String(), "model", s.name)
	err = server.Serve(ctx, ln, s.srv, *drain, log)
	stopEngine()
	<-engDone
	if err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
