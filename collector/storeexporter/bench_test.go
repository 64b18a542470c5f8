package storeexporter

import (
	"context"
	"path/filepath"
	"sync"
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
func BenchmarkExportThroughTheStore(b *testing.B) {
	const senders, requests = 8, 96 // 49,152 spans an op
	data, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(benchTraces(b, 512))
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(b.TempDir(), "store")
	e, err := newStoreExporter(&Config{Store: dir, SealInterval: 250 * time.Millisecond,
		SegmentSpans: defaultSegmentSpans}, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	if err := e.start(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.shutdown(context.Background()) }()
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
}
