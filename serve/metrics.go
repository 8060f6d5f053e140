package serve

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are the server's Prometheus metrics (text exposition format
// 0.0.4, written by hand: no client library).
type metrics struct {
	live, created, createFailures, rejected, reapedAtStart, execs atomic.Int64
	warmClaims                                                    atomic.Int64
	conns, connsRefused                                           atomic.Int64
	teardowns                                                     labelled
	reset, ready, create, teardown, claim                         *histogram
}

func newMetrics() *metrics {
	return &metrics{reset: newHistogram(), ready: newHistogram(), create: newHistogram(), teardown: newHistogram(), claim: newHistogram()}
}

// buckets are the histograms' upper bounds, in seconds.
var buckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

type histogram struct {
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; last is +Inf
	sum    float64
	n      uint64
}

func newHistogram() *histogram { return &histogram{counts: make([]uint64, len(buckets)+1)} }

func (h *histogram) observe(d time.Duration) {
	v := d.Seconds()
	i, _ := slices.BinarySearch(buckets, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.n++
	h.mu.Unlock()
}

func (h *histogram) write(w io.Writer, name, help string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum uint64
	for i, b := range buckets {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%g\"} %d\n", name, b, cum)
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, h.n, name, h.sum, name, h.n)
}

// labelled is a counter with one label.
type labelled struct {
	mu sync.Mutex
	m  map[string]int64
}

func (l *labelled) inc(v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]int64{}
	}
	l.m[v]++
}

func (l *labelled) write(w io.Writer, name, label, help string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
	keys := make([]string, 0, len(l.m))
	for k := range l.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s{%s=%q} %d\n", name, label, k, l.m[k])
	}
}

// WriteMetrics writes the server's metrics in Prometheus's text format.
func (s *Server) WriteMetrics(w io.Writer) {
	m := s.metrics
	gauge := func(name, help string, v int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
	}
	counter := func(name, help string, v int64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	gauge("gvx_serve_episodes_live", "Episodes live (starting, running or closing).", m.live.Load())
	gauge("gvx_serve_episodes_max", "The cap on live episodes.", int64(s.cfg.MaxEpisodes))
	counter("gvx_serve_episodes_created_total", "Episodes created and ready.", m.created.Load())
	counter("gvx_serve_create_failures_total", "Creates that failed after admission.", m.createFailures.Load())
	counter("gvx_serve_create_rejected_total", "Creates refused at the cap (HTTP 429).", m.rejected.Load())
	counter("gvx_serve_reaped_at_start_total", "Episodes a dead predecessor left, reaped at start.", m.reapedAtStart.Load())
	counter("gvx_serve_execs_total", "Exec requests.", m.execs.Load())
	m.teardowns.write(w, "gvx_serve_teardowns_total", "reason", "Episodes torn down, by reason (close, ttl, lease, exited, failed, shutdown).")
	m.reset.write(w, "gvx_serve_reset_seconds", "Clone of the golden volume.")
	m.ready.write(w, "gvx_serve_ready_seconds", "Sandbox start to the agent answering.")
	m.create.write(w, "gvx_serve_create_seconds", "Whole create: request to ready.")
	m.teardown.write(w, "gvx_serve_teardown_seconds", "Kill, wait, and removal of the episode's files.")
	gauge("gvx_serve_warm_ready", "Warm episodes booted ahead of demand, waiting for a claim.", s.warmReady())
	counter("gvx_serve_warm_claims_total", "Creates that claimed a warm episode.", m.warmClaims.Load())
	m.claim.write(w, "gvx_serve_claim_seconds", "Create of a warm episode: request to handed over (its boot is in the ready and reset figures).")
	gauge("gvx_serve_warm_memory_bytes", "Idle memory of the warm episodes waiting (PSS where readable, else RSS).", s.warmMemory())
	gauge("gvx_serve_connections", "Client connections open, on every listener.", m.conns.Load())
	counter("gvx_serve_connections_refused_total", "Client connections closed at once: their listener had MaxConns open.", m.connsRefused.Load())
}
