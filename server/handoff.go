package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/strata-inference/strata/engine"
)

// Disaggregated serving: a prefill worker (Options.DecodeURL set) runs each
// request's prompt and first token, then sends the request's whole state
// (engine hand-off format, docs/handoff.md) to a decode worker
// (Options.AcceptHandoff) with POST /internal/handoff. The decode worker
// resumes it and streams its events back as JSON lines; the prefill worker
// relays them to the client as if its own engine had made them. Cancelling
// the client's request closes the hand-off connection, which cancels the
// request on the decode worker and frees its pages there.

// handoffPath is the decode worker's endpoint for states.
const handoffPath = "/internal/handoff"

// wireEvent is an engine event on the hand-off connection.
type wireEvent struct {
	Token   int32                 `json:"t"`
	Logprob float32               `json:"lp"`
	Top     []engine.TokenLogprob `json:"top,omitempty"`
	Finish  engine.FinishReason   `json:"f,omitempty"`
	Err     string                `json:"err,omitempty"`
	Prompt  int                   `json:"pt"`
	Output  int                   `json:"ot"`
}

// handleHandoff resumes a handed-off request and streams its events. The
// state is read straight into the engine's pool as it arrives: at most
// MaxHandoffs at once, none larger than the engine's largest state (a
// request at its context limit).
func (s *Server) handleHandoff(w http.ResponseWriter, r *http.Request) {
	limit := s.eng.MaxHandoffBytes()
	if r.ContentLength > limit {
		writeError(w, &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "handoff_too_large",
			Message: fmt.Sprintf("A state of %d bytes is larger than this worker's largest (%d).", r.ContentLength, limit)})
		return
	}
	select {
	case s.handoffs <- struct{}{}:
	default:
		writeError(w, overloaded(1))
		return
	}
	st, err := s.eng.Resume(r.Context(), http.MaxBytesReader(w, r.Body, limit))
	<-s.handoffs
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, &apiError{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "handoff_too_large", Message: "The state is too large."})
		return
	case errors.Is(err, engine.ErrHandoff):
		writeError(w, invalidf("", "bad_handoff", "%v.", err))
		return
	case err != nil:
		writeError(w, overloaded(1))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	// Through the response's wrappers (the server's recorder), each event
	// is flushed as it is made.
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for {
		ev, err := st.Recv(r.Context())
		if err != nil {
			return // the stream ended, or the prefill worker went away
		}
		we := wireEvent{Token: ev.Token, Logprob: ev.Logprob, Top: ev.Top, Finish: ev.Finish, Prompt: ev.PromptTokens, Output: ev.OutputTokens}
		if ev.Err != nil {
			we.Err = ev.Err.Error()
		} else {
			s.metrics.genTokens.Inc() // generated here for the prefill worker
		}
		if enc.Encode(we) != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		if ev.Finish != "" {
			return
		}
	}
}

// continueRemote streams a handed-off state to the decode worker (from the
// pool's pages, as the request body is sent) and returns a stream fed by
// its events. The stream ends with an error event when the decode worker
// refuses the state or the connection breaks. The state's pages return to
// the pool once it is sent or the send fails.
func (s *Server) continueRemote(ctx context.Context, h *engine.Handoff) (*engine.Stream, error) {
	url := strings.TrimSuffix(s.opt.DecodeURL, "/") + handoffPath
	pr, pw := io.Pipe()
	go func() {
		_, err := h.WriteTo(pw)
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, pr)
	if err != nil {
		pr.CloseWithError(err)
		return nil, err
	}
	req.ContentLength = h.Size()
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	s.authorize(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("handing off to %s: %w", s.opt.DecodeURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("the decode worker %s refused the request (%s): %s", s.opt.DecodeURL, resp.Status, bytes.TrimSpace(msg))
	}
	st := engine.NewStream(0)
	go func() {
		defer resp.Body.Close()
		defer st.End()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<24)
		for sc.Scan() {
			var we wireEvent
			if err := json.Unmarshal(sc.Bytes(), &we); err != nil {
				st.Send(engine.Event{Finish: engine.FinishError, Err: fmt.Errorf("decode worker: %v", err)})
				return
			}
			ev := engine.Event{Token: we.Token, Logprob: we.Logprob, Top: we.Top, Finish: we.Finish, PromptTokens: we.Prompt, OutputTokens: we.Output}
			if we.Err != "" {
				ev.Err = errors.New(we.Err)
			}
			st.Send(ev)
			if ev.Finish != "" {
				return
			}
		}
		err := sc.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		st.Send(engine.Event{Finish: engine.FinishError, Err: fmt.Errorf("decode worker connection: %w", err)})
	}()
	return st, nil
}
