package storeexporter

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const start = 1_700_000_000_000_000_000

// sampleTraces is one otel-llm attempt span with chunk events (one without a gap, one with a
// gap that is not an int) and one span of another library, in one resource.
func sampleTraces(chunks int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	rs.Resource().Attributes().PutInt("process.pid", 42)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("otel_llm")
	ss.Scope().SetVersion("1.2")
	ours := ss.Spans().AppendEmpty()
	ours.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	ours.SetSpanID(pcommon.SpanID{1, 1, 1, 1, 1, 1, 1, 1})
	ours.SetParentSpanID(pcommon.SpanID{2, 2, 2, 2, 2, 2, 2, 2})
	ours.SetName("chat sim")
	ours.SetKind(ptrace.SpanKindClient)
	ours.SetStartTimestamp(start)
	ours.SetEndTimestamp(start + 5_000_000)
	ours.Status().SetCode(ptrace.StatusCodeError)
	ours.Status().SetMessage("boom")
	attrs := ours.Attributes()
	attrs.PutStr("otel_llm.span", "attempt")
	attrs.PutInt("otel_llm.attempt.number", 1<<40) // beyond INTEGER: NULL
	attrs.PutInt("otel_llm.stall_count", 3)
	attrs.PutDouble("otel_llm.wall_ms", 2.5) // a double where a BIGINT is typed: NULL
	attrs.PutStr("gen_ai.request.model", "m")
	for i := 0; i < chunks; i++ {
		event := ours.Events().AppendEmpty()
		event.SetName("otel_llm.chunk")
		event.SetTimestamp(pcommon.Timestamp(start + uint64(i+1)*1000))
		event.Attributes().PutInt("otel_llm.chunk.index", int64(i))
		switch i {
		case 0:
		case 1:
			event.Attributes().PutStr("otel_llm.chunk.gap_ns", "x")
		default:
			event.Attributes().PutInt("otel_llm.chunk.gap_ns", 1000)
		}
	}
	other := ours.Events().AppendEmpty()
	other.SetName("exception")
	other.SetTimestamp(start + 99)
	other.Attributes().PutBool("escaped", true)
	link := ours.Links().AppendEmpty()
	link.SetTraceID(pcommon.TraceID{9})
	link.SetSpanID(pcommon.SpanID{8})
	link.Attributes().PutStr("k", "v")
	foreign := ss.Spans().AppendEmpty()
	foreign.SetTraceID(pcommon.TraceID{7})
	foreign.SetSpanID(pcommon.SpanID{7})
	foreign.SetName("GET /")
	foreign.SetStartTimestamp(start + 10)
	foreign.SetEndTimestamp(start) // ends before it starts: Duration 0
	return td
}

func mustFormat(t testing.TB) *segmentFormat {
	f, err := loadFormat(schemaJSON)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readBack(t testing.TB, data []byte) arrow.Table {
	reader, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(reader, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	table, err := fr.ReadTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func column(t testing.TB, table arrow.Table, name string) arrow.Array {
	indices := table.Schema().FieldIndices(name)
	if len(indices) != 1 {
		t.Fatalf("no column %q", name)
	}
	return table.Column(indices[0]).Data().Chunk(0)
}

// segmentOf is td's spans (want of them appended) as one encoded segment, read back.
func segmentOf(t testing.TB, format *segmentFormat, td ptrace.Traces, want int) arrow.Table {
	r, err := newRows(format, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	if n := r.appendTraces(td, nil); n != want {
		t.Fatalf("appended %d spans, want %d", n, want)
	}
	rec := r.record()
	defer rec.Release()
	data, err := encodeSegment(format, rec)
	if err != nil {
		t.Fatal(err)
	}
	return readBack(t, data)
}

func TestSpansBecomeRowsOfTheSchema(t *testing.T) {
	format := mustFormat(t)
	table := segmentOf(t, format, sampleTraces(4), 2)
	if int(table.NumCols()) != len(format.Columns) || table.NumRows() != 2 {
		t.Fatalf("%d columns, %d rows", table.NumCols(), table.NumRows())
	}
	for i, spec := range format.Columns {
		if table.Schema().Field(i).Name != spec.Name {
			t.Errorf("column %d is %q, schema.json says %q", i, table.Schema().Field(i).Name, spec.Name)
		}
	}
	checks := map[string]string{
		"TraceId":            `["0102030405060708090a0b0c0d0e0f10" "07000000000000000000000000000000"]`,
		"ParentSpanId":       `["0202020202020202" ""]`,
		"SpanKind":           `["Client" "Unspecified"]`,
		"StatusCode":         `["Error" "Unset"]`,
		"ServiceName":        `["svc" "svc"]`,
		"Duration":           `[5000000 0]`,
		"ResourceAttributes": `[{["service.name" "process.pid"] ["svc" "42"]} {["service.name" "process.pid"] ["svc" "42"]}]`,
		"LlmRole":            `["attempt" (null)]`,
		"AttemptNumber":      `[(null) (null)]`,
		"StallCount":         `[3 (null)]`,
		"WallMs":             `[(null) (null)]`,
		"Stream":             `[false (null)]`,
		"ChunkIndex":         `[[0 1 2 3] []]`,
		"ChunkGapNs":         `[[(null) (null) 1000 1000] []]`,
		"ChunkOffsetNs":      `[[1000 2000 3000 4000] []]`,
		"Events.Name":        `[["otel_llm.chunk" "otel_llm.chunk" "otel_llm.chunk" "otel_llm.chunk" "exception"] []]`,
		"Links.TraceId":      `[["09000000000000000000000000000000"] []]`,
	}
	for name, want := range checks {
		if got := column(t, table, name).String(); got != want {
			t.Errorf("%s: got %s, want %s", name, got, want)
		}
	}
	events := column(t, table, "Events.Attributes").(*array.List)
	if got := events.String(); !bytes.Contains([]byte(got), []byte(`{["otel_llm.chunk.index" "otel_llm.chunk.gap_ns"] ["1" "x"]}`)) ||
		!bytes.Contains([]byte(got), []byte(`{["escaped"] ["true"]}`)) {
		t.Errorf("Events.Attributes: %s", got)
	}
}

func TestLargeSegmentsAreZstdAndReadBackWhole(t *testing.T) {
	format := mustFormat(t)
	r, err := newRows(format, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	td := sampleTraces(30)
	for r.count < format.Encoding.SmallSegmentRows+10 {
		r.appendTraces(td, nil)
	}
	count := r.count
	rec := r.record()
	defer rec.Release()
	data, err := encodeSegment(format, rec)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	meta := reader.MetaData()
	if meta.NumRowGroups() != 1 || int(meta.NumRows) != count {
		t.Fatalf("%d row groups, %d rows", meta.NumRowGroups(), meta.NumRows)
	}
	chunk, _ := meta.RowGroup(0).ColumnChunk(0)
	if chunk.Compression().String() != "ZSTD" {
		t.Errorf("compression %s", chunk.Compression())
	}
	table := readBack(t, data)
	if got := column(t, table, "ChunkIndex").(*array.List).Len(); got != count {
		t.Fatalf("%d rows of chunks", got)
	}
}

func TestAColumnTheExporterCannotFillIsRefused(t *testing.T) {
	format := mustFormat(t)
	format.Columns = append(format.Columns, fieldSpec{Name: "Mystery", Type: "string", Role: "base"})
	if _, err := newRows(format, nil); err == nil {
		t.Fatal("a base column the exporter does not know was accepted")
	}
	format = mustFormat(t)
	format.Typed[0].SQLType = "DOUBLE"
	if _, err := newRows(format, nil); err == nil {
		t.Fatal("a typed column of a type the exporter does not fill was accepted")
	}
	format = mustFormat(t)
	yes := true
	format.Typed[0].Default = &yes // LlmRole, a VARCHAR
	if _, err := newRows(format, nil); err == nil {
		t.Fatal("a default on a VARCHAR column was accepted (and would be ignored)")
	}
}

func TestASpanWithATimePast63BitsIsLeftOutAlone(t *testing.T) {
	r, err := newRows(mustFormat(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	td := sampleTraces(4)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	late := spans.AppendEmpty()
	spans.At(0).CopyTo(late)
	late.SetStartTimestamp(pcommon.Timestamp(uint64(1)<<63 + 5))
	eventLate := spans.AppendEmpty()
	spans.At(0).CopyTo(eventLate)
	eventLate.Events().AppendEmpty().SetTimestamp(pcommon.Timestamp(uint64(1) << 63))
	if n := r.appendTraces(td, nil); n != 2 || r.refused != 2 {
		t.Fatalf("appended %d spans, refused %d; want 2 and 2", n, r.refused)
	}
	rec := r.record()
	defer rec.Release()
	if rec.NumRows() != 2 {
		t.Fatalf("%d rows", rec.NumRows())
	}
}

func TestSegmentsStoreTheirArrowSchema(t *testing.T) {
	format := mustFormat(t)
	stored := map[string]bool{}
	for _, rows := range []int{3, format.Encoding.SmallSegmentRows + 10} {
		r, err := newRows(format, nil)
		if err != nil {
			t.Fatal(err)
		}
		for r.count < rows {
			r.appendTraces(sampleTraces(3), nil)
		}
		rec := r.record()
		data, err := encodeSegment(format, rec)
		rec.Release()
		r.release()
		if err != nil {
			t.Fatal(err)
		}
		reader, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		value := reader.MetaData().KeyValueMetadata().FindValue("ARROW:schema")
		if value == nil || *value == "" {
			t.Fatalf("a segment of %d rows stored no Arrow schema", rows)
		}
		stored[*value] = true
		got := readBack(t, data).Schema() // the reader adds each field's PARQUET:field_id
		if got.NumFields() != format.schema.NumFields() {
			t.Fatalf("%d columns read back, not %d", got.NumFields(), format.schema.NumFields())
		}
		for i, want := range format.schema.Fields() {
			field := got.Field(i)
			if field.Name != want.Name || field.Nullable != want.Nullable ||
				!arrow.TypeEqual(field.Type, want.Type) {
				t.Fatalf("column %d reads back as %s, not %s", i, field, want)
			}
		}
	}
	if len(stored) != 1 { // readers read segments that stored one schema as one list
		t.Fatalf("small and large segments stored %d different schemas", len(stored))
	}
}

// TestStringsThatAreNotUTF8AreStoredValid: OTLP requires valid UTF-8 of every string, but the
// Collector's receivers pass on what a client sent; one invalid byte in a segment fails every
// later query over the column, so each run of invalid bytes is stored as U+FFFD.
func TestStringsThatAreNotUTF8AreStoredValid(t *testing.T) {
	const bad = "\xff\xfe"
	td := sampleTraces(3)
	rs := td.ResourceSpans().At(0)
	rs.Resource().Attributes().PutStr("service.name", "svc"+bad)
	rs.Resource().Attributes().PutStr("host"+bad, "h"+bad)
	ss := rs.ScopeSpans().At(0)
	ss.Scope().SetName("otel_llm" + bad)
	ss.Scope().SetVersion("1" + bad)
	span := ss.Spans().At(0)
	span.SetName("chat " + bad)
	span.TraceState().FromRaw("k=v" + bad)
	span.Status().SetMessage("boom" + bad)
	span.Attributes().PutStr("gen_ai.request.model", "m"+bad)
	span.Attributes().PutStr("key"+bad, "value"+bad)
	span.Attributes().PutStr("key\xfe", "last") // the same key once stored: one entry, last value
	span.Attributes().PutEmptySlice("list").AppendEmpty().SetStr("item" + bad)
	event := span.Events().AppendEmpty()
	event.SetName("event" + bad)
	event.SetTimestamp(start + 7)
	event.Attributes().PutStr("ek"+bad, "ev"+bad)
	link := span.Links().At(0)
	link.TraceState().FromRaw("l=1" + bad)
	link.Attributes().PutStr("lk"+bad, "lv"+bad)

	format := mustFormat(t)
	table := segmentOf(t, format, td, 2)
	replaced := 0
	for i := 0; i < int(table.NumCols()); i++ {
		for _, chunk := range table.Column(i).Data().Chunks() {
			replaced += checkStrings(t, table.Schema().Field(i).Name, chunk)
		}
	}
	// Per row (two): service.name in ServiceName and ResourceAttributes, the resource key and
	// value, scope name and version. Once: span name, trace state, status message, the model
	// (attribute and typed column), the attribute's key (its value is the later "last"), the
	// event's name, key and value, the link's trace state, key and value. The list item is
	// JSON, escaped as \ufffd.
	if replaced != 24 {
		t.Errorf("%d strings hold U+FFFD, want 24", replaced)
	}
	attributes := column(t, table, "SpanAttributes").(*array.Map)
	keys := attributes.Keys().(*array.String)
	items := attributes.Items().(*array.String)
	start, end := attributes.ValueOffsets(0)
	seen := map[string]string{}
	for i := int(start); i < int(end); i++ {
		if _, twice := seen[keys.Value(i)]; twice {
			t.Errorf("SpanAttributes holds key %q twice", keys.Value(i))
		}
		seen[keys.Value(i)] = items.Value(i)
	}
	if got := seen["key\uFFFD"]; got != "last" {
		t.Errorf("SpanAttributes[key\uFFFD] = %q, want the last value sent", got)
	}
	checks := map[string]string{
		"SpanName":    `["chat ` + "\uFFFD" + `" "GET /"]`,
		"ServiceName": `["svc` + "\uFFFD" + `" "svc` + "\uFFFD" + `"]`,
	}
	for name, want := range checks {
		if got := column(t, table, name).String(); got != want {
			t.Errorf("%s: got %s, want %s", name, got, want)
		}
	}
}

// checkStrings fails t on any string in a that is not valid UTF-8; the number holding U+FFFD.
func checkStrings(t *testing.T, name string, a arrow.Array) int {
	found := 0
	switch a := a.(type) {
	case *array.String:
		for i := 0; i < a.Len(); i++ {
			if a.IsNull(i) {
				continue
			}
			if !utf8.ValidString(a.Value(i)) {
				t.Errorf("%s[%d] is not UTF-8: %q", name, i, a.Value(i))
			}
			if strings.Contains(a.Value(i), "\uFFFD") {
				found++
			}
		}
	case *array.Map:
		found += checkStrings(t, name+".keys", a.Keys())
		found += checkStrings(t, name+".items", a.Items())
	case *array.List:
		found += checkStrings(t, name+"[]", a.ListValues())
	}
	return found
}
