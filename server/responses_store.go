package server

import (
	"container/list"
	"sync"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// storedResponse is what the Responses API keeps of a response made with
// store true: the response as returned, and what continuing it needs.
type storedResponse struct {
	resp *responseOut
	// history is the conversation through this response (without the
	// instructions, which a continuation does not inherit), its output as
	// the last assistant message.
	history []chat.Message
	// tokens are the prompt and generated token ids exactly as the engine
	// ran them, so that a continuation's prompt starts with the very same
	// tokens and hits the prefix cache.
	tokens []int32
	// thinking is the mode the response was generated in.
	thinking bool
}

// responseStore keeps the most recent stored responses in memory, at most
// max of them (oldest evicted first); a server restart forgets them.
type responseStore struct {
	mu   sync.Mutex
	max  int
	byID map[string]*list.Element // of *storedResponse
	lru  *list.List               // front: most recently stored or read
}

func newResponseStore(max int) *responseStore {
	return &responseStore{max: max, byID: map[string]*list.Element{}, lru: list.New()}
}

// put stores r under its id, evicting the least recently used beyond the
// bound; nothing is stored when the bound is negative.
func (s *responseStore) put(r *storedResponse) {
	if s.max < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[r.resp.ID] = s.lru.PushFront(r)
	for s.lru.Len() > s.max {
		old := s.lru.Back()
		s.lru.Remove(old)
		delete(s.byID, old.Value.(*storedResponse).resp.ID)
	}
}

// get returns the response stored under id.
func (s *responseStore) get(id string) (*storedResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	s.lru.MoveToFront(e)
	return e.Value.(*storedResponse), true
}

// remove deletes the response stored under id, reporting whether there was
// one.
func (s *responseStore) remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if ok {
		s.lru.Remove(e)
		delete(s.byID, id)
	}
	return ok
}
