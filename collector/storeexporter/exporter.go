package storeexporter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
)

// The acknowledgement rule: push returns (and the receiver answers the sender "done") only
// after the segment holding the request's spans is written, flushed to disk and linked into
// the store. Spans wait in memory for at most SealInterval, with those of every other request
// that came meanwhile (one segment for all of them); a failure to seal fails every request
// in it, and the sender retries. So a Collector killed at any moment has acknowledged only
// spans that are in the store; what it had not acknowledged is sent again (and the
// temporaries it left are removed by the next opener).

// batch is the spans of the segment being gathered, and the requests waiting for it.
type batch struct {
	rows  *rows
	spans int
	keys  []spanKey // of its spans, when the exporter remembers them (stored.go)
	done  chan struct{}
	err   error
}

type storeExporter struct {
	cfg    *Config
	logger *zap.Logger
	format *segmentFormat
	store  *store

	mu      sync.Mutex
	open    *batch         // gathering spans; nil when none wait
	timer   *time.Timer    // seals open after SealInterval
	sealing chan *batch    // to the sealer
	sends   sync.WaitGroup // hand-overs to the sealer in flight (shutdown waits for them)
	stopped chan struct{}
	closed  bool

	shapes   []shape            // of the last segment: the next one reserves as much
	rowBytes float64            // the last segment's bytes a row: the next one's buffer
	memory   *recycler          // the segments' Arrow and Parquet buffers, reused
	stored   *storedSpans       // spans the store got lately; nil: none remembered
	waiting  map[spanKey]*batch // spans waiting for their segment, when stored is kept
	forget   *time.Timer        // drops stored's older generation each window
	dropped  int                // spans sent again, not written again
}

var errShutDown = errors.New("the otel-llm store exporter is shut down")

func newStoreExporter(cfg *Config, logger *zap.Logger) (*storeExporter, error) {
	format, err := loadFormat(schemaJSON)
	if err != nil {
		return nil, err
	}
	if _, err := newRows(format, nil); err != nil { // every column is one this exporter fills
		return nil, err
	}
	return &storeExporter{cfg: cfg, logger: logger, format: format, memory: newRecycler(recycledBytes)}, nil
}

func (e *storeExporter) start(context.Context, component.Host) error {
	s, err := openStore(e.cfg.Store, e.format)
	if err != nil {
		return err
	}
	if s.repaired != "" {
		e.logger.Warn("the store "+s.repaired, zap.String("store", s.path))
	}
	if err := s.checkWritable(); errNoSpace(err) {
		e.logger.Warn("the store's disk is full: every export fails (and its senders retry) "+
			"until there is room", zap.String("store", s.path), zap.Error(err))
	} else if err != nil {
		return fmt.Errorf("cannot write into the store %s (every export would fail): %w", s.path, err)
	}
	if n := s.removeOrphans(); n > 0 {
		e.logger.Info("removed temporaries of writers that died", zap.Int("files", n))
	}
	if e.cfg.ResendWindow > 0 && e.cfg.ResendSpans > 0 {
		started := time.Now()
		limit := halfOf(e.cfg.ResendSpans) // the older generation of the ids kept (stored.go)
		recent, skipped, err := s.recentSpans(started.Add(-e.cfg.ResendWindow), limit)
		if err != nil {
			e.logger.Warn("could not read the spans stored just before this start; a span "+
				"sent again after a crash may be stored twice", zap.Error(err))
		} else if len(skipped) > 0 {
			e.logger.Warn("could not read some segments stored just before this start; a span "+
				"of theirs sent again after a crash may be stored twice", zap.Strings("segments", skipped))
		}
		e.mu.Lock() // the timer's callback reads e.forget
		e.stored = newStoredSpans(e.cfg.ResendSpans, recent, started)
		e.waiting = make(map[spanKey]*batch)
		e.forget = time.AfterFunc(e.cfg.ResendWindow, e.forgetOlder)
		e.mu.Unlock()
	}
	e.store = s
	e.sealing = make(chan *batch, 2)
	e.stopped = make(chan struct{})
	go e.sealer()
	return nil
}

// push adds td's spans to the open segment and waits until it is sealed.
func (e *storeExporter) push(ctx context.Context, td ptrace.Traces) error {
	if td.SpanCount() == 0 {
		return nil
	}
	e.mu.Lock()
	if e.closed || e.store == nil {
		e.mu.Unlock()
		return errShutDown
	}
	b := e.open
	if b == nil {
		r, err := newRows(e.format, e.memory)
		if err != nil {
			e.mu.Unlock()
			return err
		}
		r.reserveLike(e.shapes)
		b = &batch{rows: r, done: make(chan struct{})}
		e.open = b
		e.timer = time.AfterFunc(e.cfg.SealInterval, func() { e.sealIfOpen(b) })
	}
	var skip func(ptrace.Span) bool
	var also []*batch // segments holding spans of td sent before, not sealed yet (b too)
	if e.stored != nil {
		skip = func(s ptrace.Span) bool { return e.sentBefore(s, b, &also) }
	}
	refusedBefore := b.rows.refused
	added := b.rows.appendTraces(td, skip)
	b.spans += added
	if refused := b.rows.refused - refusedBefore; refused > 0 {
		e.logger.Warn("spans left out: a start or event time past 2^63 ns, which the store's "+
			"signed time columns cannot hold", zap.Int("spans", refused))
	}
	full := b.spans >= e.cfg.SegmentSpans || b.rows.textBytes() >= maxSegmentText
	if full {
		e.takeLocked()
		e.sends.Add(1)
	}
	e.mu.Unlock()
	if full {
		e.sealing <- b
		e.sends.Done()
	}
	waits := also
	if added > 0 && !slices.Contains(waits, b) {
		waits = append(waits, b)
	}
	for _, w := range waits { // none when every span is stored already: answered at once
		select {
		case <-w.done:
			if w.err != nil {
				return w.err
			}
		case <-ctx.Done():
			// the sender gave up waiting: it sends these spans again, and they are not
			// written again while they wait or after they are stored (stored.go)
			return ctx.Err()
		}
	}
	return nil
}

// sentBefore says whether s is a span the store got lately or one waiting for its segment (b's
// or an earlier one), in which case it is not written again into b and the request waits for
// that segment too (added to also). Else s is remembered as waiting in b. Caller holds mu.
// A span without ids (zeros) is never taken for one sent before: nothing tells it from
// another span without ids.
func (e *storeExporter) sentBefore(s ptrace.Span, b *batch, also *[]*batch) bool {
	k, ok := keyOf(s)
	if !ok {
		return false
	}
	if e.stored.has(k) {
		e.dropped++
		return true
	}
	if w, ok := e.waiting[k]; ok {
		if !slices.Contains(*also, w) {
			*also = append(*also, w)
		}
		e.dropped++
		return true
	}
	e.waiting[k] = b
	b.keys = append(b.keys, k)
	return false
}

// sealed moves b's spans from waiting to stored (or, when b failed, forgets them: their
// senders retry and they are written then), before b's senders are answered.
func (e *storeExporter) sealed(b *batch) {
	if e.stored == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, k := range b.keys {
		if e.waiting[k] == b {
			delete(e.waiting, k)
		}
	}
	if b.err == nil {
		e.stored.add(b.keys, time.Now())
	}
}

// forgetOlder drops the older generation of stored span ids once the newer one is a window
// old (stored.go), and looks again when the next one will be.
func (e *storeExporter) forgetOlder() {
	e.mu.Lock()
	defer e.mu.Unlock()
	next := e.stored.expire(time.Now(), e.cfg.ResendWindow)
	if !e.closed {
		e.forget.Reset(next)
	}
}

// takeLocked closes the open batch to new spans (caller holds mu).
func (e *storeExporter) takeLocked() {
	e.open = nil
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
}

func (e *storeExporter) sealIfOpen(b *batch) {
	e.mu.Lock()
	if e.open != b {
		e.mu.Unlock()
		return
	}
	e.takeLocked()
	e.sends.Add(1)
	e.mu.Unlock()
	e.sealing <- b
	e.sends.Done()
}

// sealer seals batches one at a time until the channel closes.
func (e *storeExporter) sealer() {
	defer close(e.stopped)
	for b := range e.sealing {
		b.err = e.seal(b)
		e.memory.trim() // the segment's buffers are back: keep no more than it needed
		if b.err != nil {
			e.logger.Warn("could not seal a segment; its senders will retry",
				zap.Int("spans", b.spans), zap.Error(b.err))
		}
		e.sealed(b)
		close(b.done)
	}
}

func (e *storeExporter) seal(b *batch) error {
	defer b.rows.release()
	if b.spans == 0 {
		return nil // every span was one sent before (stored.go)
	}
	rec := b.rows.record()
	defer rec.Release()
	shapes := shapesOf(rec)
	e.mu.Lock()
	e.shapes = shapes
	e.mu.Unlock()
	rows := int(rec.NumRows())
	data, err := encodeSegmentInto(e.format, rec, e.bufferHint(rec), e.memory)
	if err != nil {
		return err
	}
	e.rowBytes = float64(len(data)) / float64(max(rows, 1))
	if _, err := e.store.write(data); err != nil {
		return fmt.Errorf("cannot write a segment into %s: %w", e.store.path, err)
	}
	return nil
}

// bufferHint is the room a segment's encoding starts with: as many bytes a row as the last
// segment came to, but never more than rec's own Arrow buffers (an encoding hardly outgrows
// them, and the buffer grows if it does). Rows differ: after a segment of one span with a
// 15 MiB attribute, 5,000 small spans once asked for 84 GB here and the Collector died
// ("fatal error: runtime: out of memory").
func (e *storeExporter) bufferHint(rec arrow.RecordBatch) int {
	const slack, floor = 1.125, 4096
	last := e.rowBytes * float64(rec.NumRows()) * slack
	own := 0
	for _, column := range rec.Columns() {
		own += dataBytes(column.Data())
	}
	return int(min(last, float64(own)*slack)) + floor
}

// dataBytes is what the buffers of data and its children hold.
func dataBytes(data arrow.ArrayData) int {
	n := 0
	for _, buffer := range data.Buffers() {
		if buffer != nil {
			n += buffer.Len()
		}
	}
	for _, child := range data.Children() {
		n += dataBytes(child)
	}
	return n
}

// shutdown seals what waits, then stops the sealer.
func (e *storeExporter) shutdown(ctx context.Context) error {
	e.mu.Lock()
	if e.closed || e.sealing == nil {
		e.closed = true
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	b := e.open
	e.takeLocked()
	if e.forget != nil {
		e.forget.Stop()
	}
	e.mu.Unlock()
	if b != nil {
		e.sealing <- b
	}
	e.sends.Wait()
	close(e.sealing)
	select {
	case <-e.stopped:
		e.mu.Lock()
		dropped := e.dropped
		e.mu.Unlock()
		if dropped > 0 {
			e.logger.Info("spans sent again were not stored twice",
				zap.Int("spans", dropped))
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pendingForTest is the number of spans gathered and not yet handed to the sealer.
func (e *storeExporter) pendingForTest() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.open == nil {
		return 0
	}
	return e.open.spans
}
