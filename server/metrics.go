package server

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/strata-inference/strata/engine"
)

// metrics are the server's Prometheus metrics, on a registry of its own.
//
// Token counters count what the server handed out: prompt tokens once per
// accepted generation request (as usage.prompt_tokens reports them) and
// every generated token the server read from the engine (as the responses'
// usage.completion_tokens add up). The engine's gauges are read from
// engine.Stats when the metrics are scraped.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	promptTokens prometheus.Counter
	cachedTokens prometheus.Counter
	genTokens    prometheus.Counter
	ttft         prometheus.Histogram
	itl          prometheus.Histogram
}

func newMetrics(eng *engine.Engine) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_requests_total",
			Help: "HTTP requests answered, by endpoint and status code.",
		}, []string{"endpoint", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_request_duration_seconds",
			Help:    "Time from receiving an HTTP request to the end of its response, by endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}, []string{"endpoint"}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_prompt_tokens_total",
			Help: "Prompt tokens of accepted generation requests (each prompt once, as usage.prompt_tokens counts them).",
		}),
		cachedTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_prompt_cached_tokens_total",
			Help: "Prompt tokens the prefix cache supplied instead of computing them (as usage.prompt_tokens_details.cached_tokens counts them).",
		}),
		genTokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_generation_tokens_total",
			Help: "Tokens generated and delivered to requests (as usage.completion_tokens counts them).",
		}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_time_to_first_token_seconds",
			Help:    "Time from receiving a request to its first generated token, per choice.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "strata_inter_token_latency_seconds",
			Help:    "Time between consecutive generated tokens of one choice.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.promptTokens, m.cachedTokens, m.genTokens, m.ttft, m.itl,
		newEngineCollector(eng),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// engineCollector reports the engine's state at scrape time.
type engineCollector struct {
	eng   *engine.Engine
	kinds []string // every cache kind of the model, so each is reported from the start

	queue, running, pagesUsed, pagesTotal, pagesFree *prometheus.Desc
	preemptions, steps, cancelled                    *prometheus.Desc
	prefixPages, prefixSnapshots, prefixHits         *prometheus.Desc
	specDrafted, specAccepted                        *prometheus.Desc
}

func newEngineCollector(eng *engine.Engine) *engineCollector {
	var kinds []string
	for _, s := range eng.Model().CacheSpecs() {
		if !slices.Contains(kinds, s.Name) {
			kinds = append(kinds, s.Name)
		}
	}
	return &engineCollector{
		eng:         eng,
		kinds:       kinds,
		queue:       prometheus.NewDesc("strata_queue_depth", "Requests waiting for admission to the engine (preempted ones included).", nil, nil),
		running:     prometheus.NewDesc("strata_running_requests", "Requests the engine is running (holding cache pages).", nil, nil),
		pagesUsed:   prometheus.NewDesc("strata_cache_pages_used", "Cache pool pages held, by cache kind.", []string{"kind"}, nil),
		pagesTotal:  prometheus.NewDesc("strata_cache_pages_total", "Pages in the cache pool.", nil, nil),
		pagesFree:   prometheus.NewDesc("strata_cache_pages_free", "Cache pool pages held by no request.", nil, nil),
		preemptions: prometheus.NewDesc("strata_engine_preemptions_total", "Requests preempted (pages freed, to be recomputed) for lack of cache pages.", nil, nil),
		steps:       prometheus.NewDesc("strata_engine_steps_total", "Engine steps (one forward pass each).", nil, nil),
		cancelled:   prometheus.NewDesc("strata_engine_cancelled_total", "Requests the engine dropped because their context ended (client gone, stop string reached).", nil, nil),

		prefixPages:     prometheus.NewDesc("strata_prefix_cache_pages", "Cache pool pages held by prefix-cache snapshots (included in strata_cache_pages_used).", nil, nil),
		prefixSnapshots: prometheus.NewDesc("strata_prefix_cache_snapshots", "Prefix-cache snapshots held.", nil, nil),
		prefixHits:      prometheus.NewDesc("strata_prefix_cache_hit_tokens_total", "Prompt tokens restored from prefix-cache snapshots instead of computed.", nil, nil),
		specDrafted:     prometheus.NewDesc("strata_spec_draft_tokens_total", "Tokens drafted for speculative decoding.", nil, nil),
		specAccepted:    prometheus.NewDesc("strata_spec_accepted_tokens_total", "Drafted tokens the target model accepted.", nil, nil),
	}
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queue, c.running, c.pagesUsed, c.pagesTotal, c.pagesFree, c.preemptions, c.steps, c.cancelled,
		c.prefixPages, c.prefixSnapshots, c.prefixHits, c.specDrafted, c.specAccepted} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.eng.Stats()
	ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(st.Waiting))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(st.Running))
	kinds := c.kinds
	for k := range st.PagesUsed {
		if !slices.Contains(kinds, k) {
			kinds = append(slices.Clip(kinds), k)
		}
	}
	for _, k := range kinds {
		ch <- prometheus.MustNewConstMetric(c.pagesUsed, prometheus.GaugeValue, float64(st.PagesUsed[k]), k)
	}
	ch <- prometheus.MustNewConstMetric(c.pagesTotal, prometheus.GaugeValue, float64(st.PagesTotal))
	ch <- prometheus.MustNewConstMetric(c.pagesFree, prometheus.GaugeValue, float64(st.PagesFree))
	ch <- prometheus.MustNewConstMetric(c.preemptions, prometheus.CounterValue, float64(st.Preemptions))
	ch <- prometheus.MustNewConstMetric(c.steps, prometheus.CounterValue, float64(st.Steps))
	ch <- prometheus.MustNewConstMetric(c.cancelled, prometheus.CounterValue, float64(st.Cancelled))
	ch <- prometheus.MustNewConstMetric(c.prefixPages, prometheus.GaugeValue, float64(st.PrefixPages))
	ch <- prometheus.MustNewConstMetric(c.prefixSnapshots, prometheus.GaugeValue, float64(st.PrefixSnapshots))
	ch <- prometheus.MustNewConstMetric(c.prefixHits, prometheus.CounterValue, float64(st.PrefixHitTokens))
	ch <- prometheus.MustNewConstMetric(c.specDrafted, prometheus.CounterValue, float64(st.SpecDrafted))
	ch <- prometheus.MustNewConstMetric(c.specAccepted, prometheus.CounterValue, float64(st.SpecAccepted))
}
