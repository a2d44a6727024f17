package server

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// sseWriter writes a response as server-sent events, each flushed at once:
// OpenAI's "data: <JSON>\n\n" events (send), ending with "data: [DONE]\n\n"
// (done), or named events "event: <name>\ndata: <JSON>\n\n" (sendEvent),
// as Anthropic's and the Responses API's streams have them. While the
// stream is quiet for a keep-alive interval (a long prefill), it writes a
// keep-alive so that proxies and clients do not time the connection out.
// It is safe for concurrent use; after the first failed write every later
// one returns the same error.
type sseWriter struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	err    error
	wrote  bool // since the last keep-alive tick
	closed bool // by close: no more keep-alives
	stop   chan struct{}
	once   sync.Once
}

// keepAliveComment is the keep-alive of OpenAI-style streams: an SSE
// comment, which clients skip.
const keepAliveComment = ": keep-alive\n\n"

// startSSE sends the headers of an event stream. ping is what a quiet
// stream is sent every Options.KeepAlive ("": an SSE comment); close
// stops it.
func (s *Server) startSSE(w http.ResponseWriter, ping string) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sse := &sseWriter{w: w, rc: http.NewResponseController(w), stop: make(chan struct{})}
	sse.err = sse.rc.Flush()
	if ping == "" {
		ping = keepAliveComment
	}
	if every := s.opt.KeepAlive; every > 0 {
		go sse.keepAlive(every, []byte(ping))
	}
	return sse
}

// keepAlive writes ping whenever a tick passes without another write.
func (s *sseWriter) keepAlive(every time.Duration, ping []byte) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if !s.wrote && !s.closed && s.err == nil {
			s.writeLocked(ping)
		}
		s.wrote = false
		s.mu.Unlock()
	}
}

// close stops the keep-alives; the handler calls it before it returns. A
// keep-alive being written finishes first, so none is written after.
func (s *sseWriter) close() {
	s.once.Do(func() {
		close(s.stop)
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	})
}

// send writes v as one data event.
func (s *sseWriter) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.write(sseData(nil, data))
}

// sendEvent writes v as one event named name.
func (s *sseWriter) sendEvent(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(name)+len(data)+16)
	buf = append(buf, "event: "...)
	buf = append(buf, name...)
	buf = append(buf, '\n')
	return s.write(sseData(buf, data))
}

// sseData appends "data: <data>\n\n" to buf.
func sseData(buf, data []byte) []byte {
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}

// failed reports whether a write has failed (the client is gone).
func (s *sseWriter) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// done writes the final [DONE] event of an OpenAI-style stream.
func (s *sseWriter) done() error { return s.write(sseData(nil, []byte("[DONE]"))) }

func (s *sseWriter) write(buf []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.wrote = true
	return s.writeLocked(buf)
}

func (s *sseWriter) writeLocked(buf []byte) error {
	if _, err := s.w.Write(buf); err != nil {
		s.err = err
		return err
	}
	s.err = s.rc.Flush()
	return s.err
}
