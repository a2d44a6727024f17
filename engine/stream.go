package engine

import (
	"context"
	"sync"
)

// Stream delivers one request's events in order. The engine never blocks on
// a slow reader: events queue until read.
type Stream struct {
	ID        uint64
	mu        sync.Mutex
	queue     []Event
	closed    bool
	discarded bool          // the reader is gone: hand-offs are given up as they come
	ready     chan struct{} // signalled when events arrive or the stream closes
}

func newStream(id uint64) *Stream { return &Stream{ID: id, ready: make(chan struct{}, 1)} }

func (s *Stream) push(ev Event) {
	s.mu.Lock()
	if s.discarded {
		s.mu.Unlock()
		if ev.Handoff != nil {
			ev.Handoff.Close()
		}
		return
	}
	s.queue = append(s.queue, ev)
	s.mu.Unlock()
	s.signal()
}

// Discard says the reader will read no more: events still queued or yet to
// come are dropped, and a hand-off among them is given up (its pages
// return to the pool). A reader that may stop early defers it.
func (s *Stream) Discard() {
	s.mu.Lock()
	q := s.queue
	s.queue, s.discarded = nil, true
	s.mu.Unlock()
	for _, ev := range q {
		if ev.Handoff != nil {
			ev.Handoff.Close()
		}
	}
}

func (s *Stream) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Recv returns the next event, waiting for it. After the last event (the one
// with Finish set) it returns errClosed; it returns ctx's error if ctx ends
// first.
func (s *Stream) Recv(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			ev := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return ev, nil
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return Event{}, errClosed
		}
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-s.ready:
		}
	}
}

// Collect reads every event until the stream ends and returns the generated
// tokens and the final event.
func (s *Stream) Collect(ctx context.Context) ([]int32, Event, error) {
	var toks []int32
	for {
		ev, err := s.Recv(ctx)
		if err != nil {
			return toks, Event{}, err
		}
		if ev.Err == nil && ev.Finish != FinishHandoff { // token events; cancellation, errors and handoff carry none
			toks = append(toks, ev.Token)
		}
		if ev.Finish != "" {
			return toks, ev, ev.Err
		}
	}
}

// NewStream makes a stream fed by the caller rather than by an engine: a
// request handed off to another process continues on one fed from there.
func NewStream(id uint64) *Stream { return newStream(id) }

// Send queues ev on a stream made by NewStream.
func (s *Stream) Send(ev Event) { s.push(ev) }

// End closes a stream made by NewStream after its last event.
func (s *Stream) End() { s.close() }
