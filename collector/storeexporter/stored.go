package storeexporter

import "time"

// A sender that is not answered sends its spans again: the Collector before this one was
// killed between sealing a segment and answering, or the sender gave up waiting (a timeout
// shorter than the seal, a disk slow to sync) while its spans still waited for their segment.
// So that no span lands twice, the exporter remembers the (TraceId, SpanId) of the spans the
// store got lately (read from the newest segments at start, then those it seals itself) and
// of the spans waiting for their segment, and a span sent again is not written again: one
// that waits is answered with its segment, one stored is answered at once.

// storedSpans are the ids of spans the store got lately: each is kept for at least window
// and at most twice it (two generations, the older one dropped as a window passes), and at
// most limit ids are kept (plus one segment's): past that the older generation goes early.
type storedSpans struct {
	window   time.Duration
	limit    int
	current  map[spanKey]struct{}
	previous map[spanKey]struct{}
}

func newStoredSpans(window time.Duration, limit int, known map[spanKey]struct{}) *storedSpans {
	if known == nil {
		known = make(map[spanKey]struct{})
	}
	return &storedSpans{window: window, limit: limit, current: known}
}

func (s *storedSpans) has(k spanKey) bool {
	if _, ok := s.current[k]; ok {
		return true
	}
	_, ok := s.previous[k]
	return ok
}

// add remembers keys, spans a segment just stored.
func (s *storedSpans) add(keys []spanKey) {
	if len(s.current)+len(s.previous) >= s.limit {
		s.rotate()
	}
	for _, k := range keys {
		s.current[k] = struct{}{}
	}
}

// rotate drops the older generation: called as each window passes.
func (s *storedSpans) rotate() {
	s.previous, s.current = s.current, make(map[spanKey]struct{})
}

func (s *storedSpans) len() int {
	return len(s.current) + len(s.previous)
}
