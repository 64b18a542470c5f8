package storeexporter

// A sender that is not answered sends its spans again: the Collector before this one was
// killed between sealing a segment and answering, or the sender gave up waiting (a timeout
// shorter than the seal, a disk slow to sync) while its spans still waited for their segment.
// So that no span lands twice, the exporter remembers the (TraceId, SpanId) of the spans the
// store got lately (read from the newest segments at start, then those it seals itself) and
// of the spans waiting for their segment, and a span sent again is not written again: one
// that waits is answered with its segment, one stored is answered at once.

// storedSpans are the ids of spans the store got lately, in two generations: new ids go into
// the newer one, and the older one is dropped as each window passes or when the newer one holds
// half the limit. So an id is kept for at least window unless half the limit of newer ones came
// meanwhile, and at most limit ids are kept (plus one segment's). The ids read at start are
// the older generation (at most half the limit of them: newStoredSpans's caller reads as many).
type storedSpans struct {
	half     int
	current  map[spanKey]struct{}
	previous map[spanKey]struct{}
}

func newStoredSpans(limit int, known map[spanKey]struct{}) *storedSpans {
	return &storedSpans{half: halfOf(limit), current: make(map[spanKey]struct{}), previous: known}
}

// halfOf is the ids a generation holds for a limit (at least one).
func halfOf(limit int) int {
	return max(1, (limit+1)/2)
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
	if len(s.current) >= s.half {
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
