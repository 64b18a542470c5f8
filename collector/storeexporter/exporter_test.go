package storeexporter

import (
	"context"
	"encoding/hex"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
)

func startExporter(t *testing.T, interval time.Duration, spans int) (*storeExporter, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	e, err := newStoreExporter(&Config{Store: dir, SealInterval: interval, SegmentSpans: spans}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.shutdown(context.Background()) })
	return e, dir
}

// sealedSpans counts the rows of the store's segments (the schema segment has none).
func sealedSpans(t *testing.T, dir string) int {
	t.Helper()
	total := 0
	for _, name := range names(t, filepath.Join(dir, "segments")) {
		if !strings.HasSuffix(name, ".parquet") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, "segments", name))
		if err != nil {
			t.Fatal(err)
		}
		total += int(readBack(t, data).NumRows())
	}
	return total
}

func TestAnExportReturnsOnlyOnceItsSpansAreSealed(t *testing.T) {
	e, dir := startExporter(t, 300*time.Millisecond, 1_000_000)
	returned := make(chan error, 1)
	go func() { returned <- e.push(context.Background(), sampleTraces(3)) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-returned:
		t.Fatalf("acknowledged before the seal interval (%v)", err)
	default:
	}
	if got := sealedSpans(t, dir); got != 0 {
		t.Fatalf("%d spans sealed before the interval", got)
	}
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("never acknowledged")
	}
	if got := sealedSpans(t, dir); got != 2 {
		t.Fatalf("%d spans in the store after the acknowledgement", got)
	}
}

func TestExportsThatComeTogetherShareOneSegment(t *testing.T) {
	e, dir := startExporter(t, 500*time.Millisecond, 1_000_000)
	errs := make(chan error, 5)
	for i := 0; i < 5; i++ {
		go func() { errs <- e.push(context.Background(), sampleTraces(2)) }()
	}
	for i := 0; i < 5; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	segments := 0
	for _, name := range names(t, filepath.Join(dir, "segments")) {
		if strings.HasSuffix(name, ".parquet") && !strings.HasPrefix(name, "0000") {
			segments++
		}
	}
	if got := sealedSpans(t, dir); got != 10 || segments > 2 {
		t.Fatalf("%d spans in %d segments", got, segments)
	}
}

func TestAFullSegmentIsSealedWithoutWaitingForTheInterval(t *testing.T) {
	e, dir := startExporter(t, time.Second, 2)
	e.cfg.SealInterval = time.Hour // (Validate would refuse it: here it only proves the count seals)
	if err := e.push(context.Background(), sampleTraces(1)); err != nil {
		t.Fatal(err)
	}
	if got := sealedSpans(t, dir); got != 2 {
		t.Fatalf("%d spans sealed", got)
	}
}

func TestShutdownSealsWhatWaits(t *testing.T) {
	e, dir := startExporter(t, time.Second, 1_000_000)
	returned := make(chan error, 1)
	go func() { returned <- e.push(context.Background(), sampleTraces(1)) }()
	for e.pendingForTest() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := e.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if got := sealedSpans(t, dir); got != 2 {
		t.Fatalf("%d spans sealed", got)
	}
	if err := e.push(context.Background(), sampleTraces(1)); err == nil {
		t.Fatal("an export after shutdown was acknowledged")
	}
}

func TestAFailedSealFailsItsExports(t *testing.T) {
	e, dir := startExporter(t, 50*time.Millisecond, 1_000_000)
	if err := os.Remove(filepath.Join(dir, "segments")); err != nil {
		t.Fatal(err)
	}
	if err := e.push(context.Background(), sampleTraces(1)); err == nil {
		t.Fatal("an export whose segment could not be published was acknowledged")
	}
}

func TestTheFactoryMakesAValidDefaultConfigAndATracesExporter(t *testing.T) {
	factory := NewFactory()
	if factory.Type().String() != TypeStr {
		t.Fatalf("type %s", factory.Type())
	}
	cfg := factory.CreateDefaultConfig().(*Config)
	if err := cfg.Validate(); err == nil {
		t.Fatal("a config without a store validated")
	}
	cfg.Store = filepath.Join(t.TempDir(), "store")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.SealInterval = 2 * time.Second
	if err := cfg.Validate(); err == nil {
		t.Fatal("a seal interval above a second validated")
	}
	cfg.SealInterval = defaultSealInterval
	exp, err := factory.CreateTraces(context.Background(), exportertest.NewNopSettings(factory.Type()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	if err := exp.ConsumeTraces(context.Background(), sampleTraces(2)); err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sealedSpans(t, cfg.Store); got != 2 {
		t.Fatalf("%d spans sealed", got)
	}
}

func TestSpansStoredJustBeforeARestartAreNotStoredAgain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	cfg := &Config{Store: dir, SealInterval: 20 * time.Millisecond, SegmentSpans: 1000,
		ResendWindow: time.Minute, ResendSpans: 1000}
	first, err := newStoreExporter(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := first.push(context.Background(), sampleTraces(2)); err != nil {
		t.Fatal(err)
	}
	// killed here: its senders were never told, so they send the same spans to the next one
	second, err := newStoreExporter(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := second.start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	defer second.shutdown(context.Background())
	again := sampleTraces(2)
	fresh := again.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	fresh.SetTraceID([16]byte{42})
	fresh.SetSpanID([8]byte{42})
	if err := second.push(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	if got := sealedSpans(t, dir); got != 3 {
		t.Fatalf("%d spans stored, want the 2 first ones and the new one", got)
	}
	before := len(names(t, filepath.Join(dir, "segments")))
	if err := second.push(context.Background(), sampleTraces(2)); err != nil { // all resent
		t.Fatal(err)
	}
	if got := len(names(t, filepath.Join(dir, "segments"))); got != before {
		t.Fatalf("a segment of no spans was written (%d files, %d before)", got, before)
	}
}

// Senders filling segments in recycled memory while earlier ones are encoded in it (and the
// memory trimmed after each): every span sealed once, each segment whole. Run with -race too.
func TestSendersAndTheSealerShareTheMemoryCleanly(t *testing.T) {
	e, dir := startExporter(t, 5*time.Millisecond, 300)
	const senders, pushes = 6, 15
	errs := make(chan error, senders*pushes)
	for s := 0; s < senders; s++ {
		go func() {
			for p := 0; p < pushes; p++ {
				errs <- e.push(context.Background(), sampleTraces(30))
			}
		}()
	}
	for i := 0; i < senders*pushes; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := sealedSpans(t, dir); got != 2*senders*pushes {
		t.Fatalf("%d spans sealed, %d sent", got, 2*senders*pushes)
	}
	if kept := e.memory.keptBytes(); kept == 0 || kept > recycledBytes {
		t.Fatalf("%d bytes kept free", kept)
	}
}

func TestAStoreTheExporterCannotWriteFailsItsStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if _, err := openStore(dir, mustFormat(t)); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "tmp")) // (as in TestAStoreThatCannotTakeAFileIsFoundAtOnce)
	os.WriteFile(filepath.Join(dir, "tmp"), nil, 0o644)
	e, err := newStoreExporter(&Config{Store: dir, SealInterval: time.Second, SegmentSpans: 10}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	err = e.start(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "cannot write into the store") {
		t.Fatalf("started on a store it cannot write: %v", err)
	}
}

func restartedExporter(t *testing.T, cfg *Config) *storeExporter {
	t.Helper()
	e, err := newStoreExporter(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.shutdown(context.Background()) })
	return e
}

func TestSpansWithoutIdsAreNeverTakenForSpansSentAgain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	cfg := &Config{Store: dir, SealInterval: 20 * time.Millisecond, SegmentSpans: 1000,
		ResendWindow: time.Minute, ResendSpans: 1000}
	noIDs := func(name string) ptrace.Traces {
		td := ptrace.NewTraces()
		span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		span.SetName(name) // ids left unset: zeros, as a client that sends none
		span.SetStartTimestamp(start)
		return td
	}
	half := func(name string) ptrace.Traces { // a trace id of zeros, a span id of its own
		td := noIDs(name)
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetSpanID([8]byte{7})
		return td
	}
	first := restartedExporter(t, cfg)
	for _, td := range []ptrace.Traces{noIDs("before"), half("before")} {
		if err := first.push(context.Background(), td); err != nil {
			t.Fatal(err)
		}
	}
	second := restartedExporter(t, cfg)
	for _, td := range []ptrace.Traces{noIDs("after"), half("after")} {
		if err := second.push(context.Background(), td); err != nil {
			t.Fatal(err)
		}
	}
	if got := sealedSpans(t, dir); got != 4 {
		t.Fatalf("%d spans stored of the 4 sent (spans without ids dropped as resent)", got)
	}
}

func TestAnUnreadableSegmentLeavesTheOthersSpansKnownAtStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	cfg := &Config{Store: dir, SealInterval: 20 * time.Millisecond, SegmentSpans: 1000,
		ResendWindow: time.Minute, ResendSpans: 1000}
	first := restartedExporter(t, cfg)
	if err := first.push(context.Background(), sampleTraces(2)); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "segments", "99999999999999999999-junk.parquet")
	if err := os.WriteFile(junk, []byte("not parquet at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	second := restartedExporter(t, cfg)
	if got := second.stored.len(); got != 2 {
		t.Fatalf("%d span ids known at start, want the 2 readable ones", got)
	}
	os.Remove(junk)
	if err := second.push(context.Background(), sampleTraces(2)); err != nil {
		t.Fatal(err)
	}
	if got := sealedSpans(t, dir); got != 2 {
		t.Fatalf("%d spans stored, the 2 sent again stored twice", got)
	}
}

// manySpans is n small spans with ids of their own, in one request.
func manySpans(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i := 0; i < n; i++ {
		span := spans.AppendEmpty()
		span.SetTraceID([16]byte{1, byte(i >> 16), byte(i >> 8), byte(i)})
		span.SetSpanID([8]byte{2, byte(i >> 16), byte(i >> 8), byte(i)})
		span.SetName("small")
		span.SetStartTimestamp(start)
	}
	return td
}

func TestTheBufferHintIsBoundedByTheSegmentsOwnBytes(t *testing.T) {
	e, _ := startExporter(t, time.Second, 1_000_000)
	r, err := newRows(e.format, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	r.appendTraces(manySpans(5000), nil)
	rec := r.record()
	defer rec.Release()
	own := 0
	for _, column := range rec.Columns() {
		own += dataBytes(column.Data())
	}
	e.rowBytes = 15 << 20 // the last segment: one span with a 15 MiB attribute
	if hint := e.bufferHint(rec); hint > own*2+4096 {
		t.Fatalf("%d bytes asked for a segment of %d bytes of rows", hint, own)
	}
	e.rowBytes = 10 // rows alike: the last segment's size a row is the hint
	if hint := e.bufferHint(rec); hint != int(10*5000*1.125)+4096 {
		t.Fatalf("hint %d", hint)
	}
}

func TestSmallSpansAfterAHugeOneAreSealed(t *testing.T) {
	e, dir := startExporter(t, 10*time.Millisecond, 1_000_000)
	huge := manySpans(1)
	content := make([]byte, 8<<20) // a captured prompt of 16 MiB that does not compress
	rand.New(rand.NewSource(1)).Read(content)
	huge.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().
		PutStr("gen_ai.input.messages", hex.EncodeToString(content))
	if err := e.push(context.Background(), huge); err != nil {
		t.Fatal(err)
	}
	// the hint once came from the huge segment's bytes a row: 16 MiB x 20,000 rows
	if err := e.push(context.Background(), manySpans(20_000)); err != nil {
		t.Fatal(err)
	}
	if got := sealedSpans(t, dir); got != 1+20_000 {
		t.Fatalf("%d spans sealed", got)
	}
}

func TestASegmentIsSealedAtOnceWhenAColumnHoldsTheMostTextItMay(t *testing.T) {
	e, dir := startExporter(t, time.Second, 1_000_000)
	e.cfg.SealInterval = time.Hour // only the text may seal it
	defer func(before int) { maxSegmentText = before }(maxSegmentText)
	maxSegmentText = 64 << 10
	td := manySpans(1)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().
		PutStr("gen_ai.input.messages", strings.Repeat("p", 64<<10))
	done := make(chan error, 1)
	go func() { done <- e.push(context.Background(), td) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("not sealed: a segment past the text bound waited for the interval")
	}
	if got := sealedSpans(t, dir); got != 1 {
		t.Fatalf("%d spans sealed", got)
	}
}

func TestTheIdsKeptAtStartAreBoundedWithinOneSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	cfg := &Config{Store: dir, SealInterval: 20 * time.Millisecond, SegmentSpans: 1000,
		ResendWindow: time.Minute, ResendSpans: 1000}
	if err := restartedExporter(t, cfg).push(context.Background(), manySpans(10)); err != nil {
		t.Fatal(err)
	}
	cfg.ResendSpans = 8 // a merged segment can hold millions: resend_spans bounds the memory
	if got := restartedExporter(t, cfg).stored.len(); got != 4 {
		t.Fatalf("%d span ids kept at start, resend_spans 8 (half of it read then)", got)
	}
}

func TestTheIdsKeptAtStartAreForgottenWhenTheWindowEnds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	cfg := &Config{Store: dir, SealInterval: 20 * time.Millisecond, SegmentSpans: 1000,
		ResendWindow: time.Minute, ResendSpans: 1000}
	first := restartedExporter(t, cfg)
	if err := first.push(context.Background(), manySpans(10)); err != nil {
		t.Fatal(err)
	}
	// the segment stamped ahead, so it is within the short window below however long the
	// restart takes on a busy machine (else no id is read and the test proves nothing)
	number, err := first.store.current()
	if err != nil {
		t.Fatal(err)
	}
	segments, err := filepath.Glob(filepath.Join(first.store.generationDir(number), "*.parquet"))
	if err != nil || len(segments) == 0 {
		t.Fatalf("no segment written (%v)", err)
	}
	ahead := time.Now().Add(time.Hour)
	for _, segment := range segments {
		if err := os.Chtimes(segment, ahead, ahead); err != nil {
			t.Fatal(err)
		}
	}
	cfg.ResendWindow = 50 * time.Millisecond
	e := restartedExporter(t, cfg)
	deadline := time.Now().Add(30 * time.Second)
	read := false
	for {
		e.mu.Lock()
		kept := e.stored.len()
		e.mu.Unlock()
		if kept == 0 && !read {
			t.Fatal("no span id was read at the start")
		}
		read = true
		if kept == 0 {
			return // no span came after the window: the ids went all the same
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d ids still kept long after the window", kept)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dedupingExporter(t *testing.T, interval time.Duration) (*storeExporter, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	return restartedExporter(t, &Config{Store: dir, SealInterval: interval, SegmentSpans: 1000,
		ResendWindow: time.Minute, ResendSpans: 1000}), dir
}

// A sender that gives up waiting for its segment (a timeout shorter than the seal) sends the
// same spans again while they still wait: they are written once, and the second export is
// answered when their segment is sealed. They were stored twice.
func TestSpansSentAgainWhileTheyWaitForTheirSegmentAreStoredOnce(t *testing.T) {
	e, dir := dedupingExporter(t, 300*time.Millisecond)
	impatient, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.push(impatient, manySpans(5)); err == nil {
		t.Fatal("answered before the seal interval")
	}
	again := manySpans(5)
	fresh := again.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	fresh.SetTraceID([16]byte{42})
	fresh.SetSpanID([8]byte{42})
	if err := e.push(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	if got := sealedSpans(t, dir); got != 6 {
		t.Fatalf("%d spans stored, want the 5 sent twice once and the new one", got)
	}
}

// A sender that timed out and sends again after the segment was sealed: not written again,
// answered at once (no new segment, no wait for the next seal).
func TestSpansSentAgainAfterTheirSegmentWasSealedAreNotStoredAgain(t *testing.T) {
	e, dir := dedupingExporter(t, 20*time.Millisecond)
	if err := e.push(context.Background(), manySpans(5)); err != nil {
		t.Fatal(err)
	}
	before := len(names(t, filepath.Join(dir, "segments")))
	e.cfg.SealInterval = time.Hour // (Validate would refuse it: here it shows no seal is waited for)
	if err := e.push(context.Background(), manySpans(5)); err != nil {
		t.Fatal(err)
	}
	if got := sealedSpans(t, dir); got != 5 {
		t.Fatalf("%d spans stored of 5 sent twice", got)
	}
	if got := len(names(t, filepath.Join(dir, "segments"))); got != before {
		t.Fatalf("a segment of no spans was written (%d files, %d before)", got, before)
	}
}

// A segment that cannot be sealed fails its exports, the one waiting for it as a resend
// included, and leaves no span remembered: sent again once there is room, they are stored.
func TestSpansOfASegmentThatFailedAreStoredWhenSentAgain(t *testing.T) {
	e, dir := dedupingExporter(t, 100*time.Millisecond)
	segments := filepath.Join(dir, "segments")
	target, err := os.Readlink(segments)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(segments); err != nil {
		t.Fatal(err)
	}
	impatient, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.push(impatient, manySpans(3)); err == nil {
		t.Fatal("answered before the seal interval")
	}
	if err := e.push(context.Background(), manySpans(3)); err == nil {
		t.Fatal("a resend waiting for a segment that could not be sealed was answered")
	}
	if err := os.Symlink(target, segments); err != nil {
		t.Fatal(err)
	}
	if err := e.push(context.Background(), manySpans(3)); err != nil {
		t.Fatal(err)
	}
	if got := sealedSpans(t, dir); got != 3 {
		t.Fatalf("%d spans stored of 3 sent until answered", got)
	}
}

// The ids of the spans stored are kept in two generations of at most half resend_spans each
// (plus a segment's): the older one goes when the newer one is full, or once the newer one is
// a window old.
func TestTheIdsRememberedAreBoundedInNumberAndTime(t *testing.T) {
	key := func(n byte) spanKey { return spanKey{1, 15: n, 16: n} }
	at := time.Unix(1_000_000, 0)
	s := newStoredSpans(4, map[spanKey]struct{}{key(9): {}}, at) // 9 was read at start
	s.add([]spanKey{key(1), key(2), key(3)}, at)
	if !s.has(key(9)) || !s.has(key(1)) || s.len() != 4 {
		t.Fatalf("%d ids kept, 9 kept: %v, 1 kept: %v", s.len(), s.has(key(9)), s.has(key(1)))
	}
	s.add([]spanKey{key(4)}, at) // the newer generation held 3 of 2: it is the older one now
	if s.has(key(9)) || !s.has(key(1)) || !s.has(key(4)) || s.len() != 4 {
		t.Fatalf("%d ids kept after the newer generation filled", s.len())
	}
	if next := s.expire(at.Add(time.Minute), time.Minute); next != time.Minute {
		t.Fatalf("asked again in %v", next)
	}
	if s.has(key(1)) || !s.has(key(4)) || s.len() != 1 {
		t.Fatalf("%d ids kept a window on", s.len())
	}
	s.expire(at.Add(2*time.Minute), time.Minute) // two windows without a span: nothing left
	if s.len() != 0 {
		t.Fatalf("%d ids kept two windows on", s.len())
	}
}

// The window's timer comes soon after the newer generation began because the one before it
// filled: the ids moved into the older one then are kept until the newer one is a window old
// (they went within milliseconds: a span sent again a moment later was stored twice).
func TestIdsMovedToTheOlderGenerationByTheLimitAreKeptAWindow(t *testing.T) {
	key := func(n byte) spanKey { return spanKey{2, 15: n, 16: n} }
	at := time.Unix(1_000_000, 0)
	s := newStoredSpans(20, nil, at)
	ten := make([]spanKey, 10)
	for i := range ten {
		ten[i] = key(byte(i))
	}
	s.add(ten, at.Add(50*time.Second))
	s.add([]spanKey{key(99)}, at.Add(59*time.Second))  // the newer generation is full: it moves
	next := s.expire(at.Add(time.Minute), time.Minute) // the window's timer, 1 s on
	if !s.has(key(0)) || next != 59*time.Second {
		t.Fatalf("ids of 1 s ago forgotten (%v) or asked again in %v, want 59s", !s.has(key(0)), next)
	}
	s.expire(at.Add(59*time.Second+time.Minute), time.Minute)
	if s.has(key(0)) || !s.has(key(99)) {
		t.Fatal("the older generation kept past a window of the newer one")
	}
}

// A window shorter than a sender's retry is refused: the exporter's timer would fire without
// end for nothing.
func TestAResendWindowUnderASecondIsRefused(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Store = "somewhere"
	cfg.ResendWindow = time.Millisecond
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "resend_window") {
		t.Fatalf("a 1ms resend_window was taken: %v", err)
	}
	cfg.ResendWindow = 0
	if err := cfg.Validate(); err != nil {
		t.Fatalf("resend_window 0 (off) refused: %v", err)
	}
}
