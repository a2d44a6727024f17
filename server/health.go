package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// decodeProbeTimeout bounds a prefill worker's check of its decode worker.
const decodeProbeTimeout = 2 * time.Second

// decodeHealth is what a prefill worker last saw of its decode worker, so
// that it logs a change of state once rather than on every probe.
type decodeHealth struct {
	mu   sync.Mutex
	down bool
}

// handleHealth answers {"status":"ok"}. A prefill worker is only as
// healthy as its decode worker, which generates for it: it asks the decode
// worker's /health, and answers 503 {"status":"unhealthy","reason":...}
// when that fails, logging at WARN when the decode worker becomes
// unreachable (and at INFO when it is back).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.opt.DecodeURL == "" {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	}
	err := s.probeDecode(r.Context())
	s.health.mu.Lock()
	changed := s.health.down != (err != nil)
	s.health.down = err != nil
	s.health.mu.Unlock()
	if err != nil {
		if changed {
			s.log.Warn("the decode worker is unreachable; this prefill worker reports unhealthy", "decode_url", s.opt.DecodeURL, "err", err)
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unhealthy", "reason": err.Error()})
		return
	}
	if changed {
		s.log.Info("the decode worker is reachable again", "decode_url", s.opt.DecodeURL)
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// probeDecode asks the decode worker's /health.
func (s *Server) probeDecode(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, decodeProbeTimeout)
	defer cancel()
	url := strings.TrimSuffix(s.opt.DecodeURL, "/") + "/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("decode worker %s: %w", s.opt.DecodeURL, err)
	}
	s.authorize(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("decode worker %s unreachable: %w", s.opt.DecodeURL, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("decode worker %s answered %s", url, resp.Status)
	}
	return nil
}
