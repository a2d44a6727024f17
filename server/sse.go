package server

import (
	"encoding/json"
	"net/http"
	"sync"
)

// sseWriter writes a response as server-sent events: each event is
// "data: <JSON>\n\n", flushed at once, and the stream ends with
// "data: [DONE]\n\n". It is safe for concurrent use; after the first
// failed write every later one returns the same error.
type sseWriter struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

// startSSE sends the headers of an event stream.
func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	s.err = s.rc.Flush()
	return s
}

// send writes v as one event.
func (s *sseWriter) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.write(data)
}

// failed reports whether a write has failed (the client is gone).
func (s *sseWriter) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// done writes the final [DONE] event.
func (s *sseWriter) done() error { return s.write([]byte("[DONE]")) }

func (s *sseWriter) write(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	buf := make([]byte, 0, len(data)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		s.err = err
		return err
	}
	s.err = s.rc.Flush()
	return s.err
}
