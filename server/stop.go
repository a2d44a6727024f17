package server

import "strings"

// stopMatcher finds the request's stop strings in generated text as it
// arrives. Text that could be the beginning of a stop string is held back
// until later text decides it, so no part of a stop string is ever returned.
// Input and output are whole UTF-8 characters.
type stopMatcher struct {
	stops []string
	held  string
	// matched is the stop string found, once Add reports one.
	matched string
}

// Add appends text and returns what is now certain to come before any stop
// string. found reports that a stop string was reached: out then ends just
// before it, and the rest of the text is discarded.
func (m *stopMatcher) Add(text string) (out string, found bool) {
	if len(m.stops) == 0 {
		return text, false
	}
	buf := m.held + text
	first := -1
	for _, s := range m.stops {
		if i := strings.Index(buf, s); i >= 0 && (first < 0 || i < first) {
			first, m.matched = i, s
		}
	}
	if first >= 0 {
		m.held = ""
		return buf[:first], true
	}
	hold := 0
	for _, s := range m.stops {
		for n := min(len(s)-1, len(buf)); n > hold; n-- {
			if strings.HasSuffix(buf, s[:n]) {
				hold = n
				break
			}
		}
	}
	m.held = buf[len(buf)-hold:]
	return buf[:len(buf)-hold], false
}

// Flush returns the text held back, at the end of generation.
func (m *stopMatcher) Flush() string {
	s := m.held
	m.held = ""
	return s
}
