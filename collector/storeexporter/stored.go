package storeexporter

import "time"

// A sender that is not answered sends its spans again: the Collector before this one was
// killed between sealing a segment and answering, or the sender gave up waiting (a timeout
// shorter than the seal, a disk slow to sync) while its spans still waited for their segment.
// So that no span lands twice, the exporter remembers the (TraceId, SpanId) of the spans the
// store got lately (read from the newest segments at start, then those it seals itself) and
// of the spans waiting for their segment, and a span sent again is not written again: one
// that waits is answered with its segment, one stored is answered at once.

// storedSpans are the ids of spans the store got lately, in two generations: new ids go into
// the newer one, and the older one is dropped once the newer one is a window old (expire) or
// when it holds half the limit (add). So an id is kept for at least a window unless half the
// limit of newer ones came meanwhile, and at most the limit is kept, plus up to two segments'
// (a generation fills by whole segments). The ids read at start are the older generation (at
// most half the limit of them: newStoredSpans's caller reads as many).
type storedSpans struct {
	half     int
	current  map[spanKey]struct{}
	previous map[spanKey]struct{}
	since    time.Time // when current began
}

func newStoredSpans(limit int, known map[spanKey]struct{}, now time.Time) *storedSpans {
	return &storedSpans{
		half: halfOf(limit), current: make(map[spanKey]struct{}), previous: known, since: now,
	}
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
func (s *storedSpans) add(keys []spanKey, now time.Time) {
	if len(s.current) >= s.half {
		s.rotate(now)
	}
	for _, k := range keys {
		s.current[k] = struct{}{}
	}
}

// expire drops the older generation if the newer one began at least window ago, and returns
// how long until it should be asked again. A newer generation begun by add (when the one
// before it filled) may be younger: the ids that went into the older one then are kept until
// it is a window old, so none goes within less than a window but by the limit.
func (s *storedSpans) expire(now time.Time, window time.Duration) time.Duration {
	if age := now.Sub(s.since); age < window {
		return window - age
	}
	s.rotate(now)
	return window
}

func (s *storedSpans) rotate(now time.Time) {
	s.previous, s.current, s.since = s.current, make(map[spanKey]struct{}), now
}

func (s *storedSpans) len() int {
	return len(s.current) + len(s.previous)
}
