package storeexporter

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
)

// benchTraces is `spans` otel-llm attempt spans of 30 chunk events each, as an OTLP request
// decoded by the receiver (pdata).
func benchTraces(b *testing.B, spans int) ptrace.Traces {
	one := sampleTraces(30)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	one.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	for i := 0; i < spans; i++ {
		one.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).CopyTo(ss.Spans().AppendEmpty())
	}
	return td
}

// BenchmarkSpansToSegment: decoding the request is the receiver's; here the rows and the
// Parquet encoding, per span.
func BenchmarkSpansToSegment(b *testing.B) {
	format := mustFormat(b)
	td := benchTraces(b, 512)
	data, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var shapes []shape
	mem := newRecycler(recycledBytes) // as the exporter: buffers reused segment after segment
	sizeHint := 0
	started := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		decoded, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
		if err != nil {
			b.Fatal(err)
		}
		r, err := newRows(format, mem)
		if err != nil {
			b.Fatal(err)
		}
		r.reserveLike(shapes)
		for k := 0; k < 20; k++ { // a segment of 10,240 spans
			r.appendTraces(decoded, nil)
		}
		rec := r.record()
		shapes = shapesOf(rec)
		data, err := encodeSegmentInto(format, rec, sizeHint, mem)
		if err != nil {
			b.Fatal(err)
		}
		sizeHint = len(data)
		rec.Release()
		r.release()
		mem.trim()
	}
	b.ReportMetric(float64((cpuTime()-started).Nanoseconds())/float64(b.N*512*20), "cpu-ns/span")
}

// cpuTime is this process's user and system CPU time (every thread, the GC's too).
func cpuTime() time.Duration {
	var usage syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// BenchmarkReceiverDecode: what the Collector's OTLP receiver spends decoding a request into
// pdata before any exporter sees it, per span: the floor under the exporter's own work.
func BenchmarkReceiverDecode(b *testing.B) {
	data, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(benchTraces(b, 512))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	started := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-started).Nanoseconds())/float64(b.N*512), "cpu-ns/span")
}

// BenchmarkExportThroughTheStore: what the Collector spends per span from a request's bytes to
// its segment on disk, as in a running Collector: 8 senders at once, each request decoded (the
// receiver's part) and pushed into one exporter (seal_interval 250ms), segments written,
// flushed and published. Its cpu-ns/span minus BenchmarkReceiverDecode's is the exporter's own.
// Each span is given ids of its own after the decode. Without resend_window, as the
// exporter's own cost was first measured; BenchmarkExportThroughTheStoreRemembering is the
// same with the default resend_window, every span's ids remembered.
func BenchmarkExportThroughTheStore(b *testing.B) {
	exportThroughTheStore(b, 0)
}

func BenchmarkExportThroughTheStoreRemembering(b *testing.B) {
	exportThroughTheStore(b, defaultResendWindow)
}

func exportThroughTheStore(b *testing.B, resendWindow time.Duration) {
	const senders, requests = 8, 96 // 49,152 spans an op
	data, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(benchTraces(b, 512))
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "store")
	e, err := newStoreExporter(&Config{Store: dir, SealInterval: 250 * time.Millisecond,
		SegmentSpans: defaultSegmentSpans, ResendWindow: resendWindow,
		ResendSpans: defaultResendSpans}, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	if err := e.start(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.shutdown(context.Background()) }()
	var next atomic.Uint64 // each span's ids
	b.ReportAllocs()
	started := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		work := make(chan struct{}, requests)
		for k := 0; k < requests; k++ {
			work <- struct{}{}
		}
		close(work)
		var wg sync.WaitGroup
		failures := make(chan error, senders)
		for s := 0; s < senders; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range work {
					td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
					if err == nil {
						ownIDs(td, &next)
						err = e.push(context.Background(), td)
					}
					if err != nil {
						failures <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(failures)
		for err := range failures {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-started).Nanoseconds())/float64(b.N*requests*512), "cpu-ns/span")
	b.ReportMetric(float64(e.memory.keptBytes())/(1<<20), "kept-MiB")
	if resendWindow > 0 && e.dropped > 0 {
		b.Fatalf("%d spans of their own ids taken for spans sent again", e.dropped)
	}
}

// ownIDs gives every span of td a span id of its own (the trace id kept).
func ownIDs(td ptrace.Traces, next *atomic.Uint64) {
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < spans.Len(); i++ {
		var id [8]byte
		binary.BigEndian.PutUint64(id[:], next.Add(1))
		spans.At(i).SetSpanID(id)
	}
}
