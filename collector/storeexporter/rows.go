package storeexporter

import (
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The rows: every span of an OTLP request as one row of the segment schema, with the values
// otel_llm's span_row (the embedded writer) and its OTLP ingest give the same span. Which
// columns exist, their order and types, which attribute fills which typed column and how the
// chunk events become arrays all come from schema.json; this file only knows how each kind of
// column is read from a span.

// span is what a column is filled from: the span and what was worked out for it once.
type span struct {
	ptrace.Span
	resourceKeys   []string
	resourceValues [][]byte
	service        string
	scopeName      string
	scopeVersion   string
	attributes     []keyValue
	typed          []pcommon.Value // per typed column; an empty Value where the attribute is absent
	found          []bool
	ours           bool // the span is otel-llm's (its role attribute is set): defaults apply
}

type filler func(b array.Builder, s *span, r *rows)

// rows appends spans, column by column, to an Arrow record of the segment schema.
type rows struct {
	format   *segmentFormat
	builder  *array.RecordBuilder
	fillers  []filler
	typedAt  map[string]int // attribute -> index into format.Typed
	count    int
	refused  int // spans left out: a time the store cannot hold (fitsStore)
	scratch  []byte
	eventKVs []keyValue
	offsets  []int32
	valid    []bool
	kvs      []keyValue
	current  span
}

func newRows(format *segmentFormat, mem memory.Allocator) (*rows, error) {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	r := &rows{
		format:  format,
		builder: array.NewRecordBuilder(mem, format.schema),
		typedAt: make(map[string]int, len(format.Typed)),
	}
	typedByColumn := make(map[string]int, len(format.Typed))
	for i, t := range format.Typed {
		r.typedAt[t.Attribute] = i
		typedByColumn[t.Column] = i
	}
	r.current.typed = make([]pcommon.Value, len(format.Typed))
	r.current.found = make([]bool, len(format.Typed))
	for _, column := range format.Columns {
		var fill filler
		var err error
		switch column.Role {
		case "base":
			fill, err = baseFiller(column)
		case "typed":
			i, ok := typedByColumn[column.Name]
			if !ok {
				return nil, fmt.Errorf("typed column %q is not in the typed plan", column.Name)
			}
			fill, err = typedFiller(format.Typed[i], i, column)
		case "chunk":
			fill, err = chunkFiller(format.Chunks, column)
		default:
			err = fmt.Errorf("column %q has no role this exporter knows (%q)", column.Name, column.Role)
		}
		if err != nil {
			r.builder.Release()
			return nil, err
		}
		r.fillers = append(r.fillers, fill)
	}
	return r, nil
}

func (r *rows) release() { r.builder.Release() }

// appendTraces appends every span of td but those skip says to leave out (nil: none); the
// number appended.
func (r *rows) appendTraces(td ptrace.Traces, skip func(ptrace.Span) bool) int {
	appended := 0
	serviceKey := r.format.ServiceNameAttribute
	resources := td.ResourceSpans()
	for i := 0; i < resources.Len(); i++ {
		rs := resources.At(i)
		kvs := entries(rs.Resource().Attributes())
		keys := make([]string, len(kvs))
		values := make([][]byte, len(kvs))
		service := ""
		for j, kv := range kvs {
			keys[j] = kv.key
			values[j] = renderValue(nil, kv.value)
			if kv.key == serviceKey {
				service = string(values[j])
			}
		}
		scopes := rs.ScopeSpans()
		for j := 0; j < scopes.Len(); j++ {
			ss := scopes.At(j)
			scope := ss.Scope()
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				if !fitsStore(spans.At(k)) {
					r.refused++
					continue
				}
				if skip != nil && skip(spans.At(k)) {
					continue
				}
				s := &r.current
				s.Span = spans.At(k)
				s.resourceKeys, s.resourceValues, s.service = keys, values, service
				s.scopeName, s.scopeVersion = scope.Name(), scope.Version()
				r.prepare(s)
				for c, fill := range r.fillers {
					fill(r.builder.Field(c), s, r)
				}
				r.count++
				appended++
			}
		}
	}
	return appended
}

// fitsStore says whether the store's signed 64-bit nanosecond columns can hold s's times:
// OTLP's are unsigned, and a start or an event time past 2^63 (the year 2262) would wrap to a
// time before 1970 (its end may be anything: the duration is unsigned there too). Such a span
// is left out, with a warning, and the rest of its request stored and acknowledged: sent again
// it could never be stored. The Python spool ingest leaves out the whole request message that
// holds one (its rows cannot make a table).
func fitsStore(s ptrace.Span) bool {
	const limit = uint64(1) << 63
	if uint64(s.StartTimestamp()) >= limit {
		return false
	}
	events := s.Events()
	for i := 0; i < events.Len(); i++ {
		if uint64(events.At(i).Timestamp()) >= limit {
			return false
		}
	}
	return true
}

// prepare works out once per span what several columns need: its attributes with duplicates
// folded, the typed columns' raw values, whether it is otel-llm's.
func (r *rows) prepare(s *span) {
	r.kvs = appendEntries(r.kvs[:0], s.Attributes())
	s.attributes = r.kvs
	clear(s.found)
	s.ours = false
	for _, kv := range s.attributes {
		if i, ok := r.typedAt[kv.key]; ok {
			s.typed[i] = kv.value
			s.found[i] = true
		}
		if kv.key == r.format.TypedDefaultsWhen {
			s.ours = true
		}
	}
}

// hexID is an id in lowercase hex; "" for a parent id that is not there. The Collector's data
// model cannot tell an id that was not sent from one of zeros: ids render as zeros, a parent of
// zeros as none (what the Python ingest makes of the ids SDKs send: always set, a root span's
// parent never).
func hexID(buf []byte, id []byte, empty bool) []byte {
	if empty {
		return buf[:0]
	}
	return hex.AppendEncode(buf[:0], id)
}

func str(b array.Builder) *array.StringBuilder { return b.(*array.StringBuilder) }

// appendText appends s to a string column as valid UTF-8: OTLP requires it of every string,
// but the Collector's receivers pass on whatever bytes a client sent, and one invalid byte in
// a Parquet string column fails every later query that reads the column (the Python ingest's
// decoder refuses such a request). Each run of invalid bytes becomes U+FFFD.
func appendText(sb *array.StringBuilder, s string) {
	if utf8.ValidString(s) {
		sb.Append(s)
		return
	}
	sb.Append(strings.ToValidUTF8(s, "\uFFFD"))
}

func appendMap(mb *array.MapBuilder, kvs []keyValue, r *rows) {
	mb.Append(true)
	keys, items := str(mb.KeyBuilder()), str(mb.ItemBuilder())
	for _, kv := range kvs {
		appendText(keys, kv.key)
		r.scratch = renderValue(r.scratch[:0], kv.value)
		items.BinaryBuilder.Append(r.scratch)
	}
}

func expect(column fieldSpec, kind string, item string) error {
	if column.Type != kind || (item != "" && (column.Item == nil || column.Item.Type != item)) {
		return fmt.Errorf("column %q is %s, this exporter fills it as %s of %s", column.Name,
			column.Type, kind, item)
	}
	return nil
}

// baseFiller fills one of the Collector ClickHouse exporter's otel_traces columns.
func baseFiller(column fieldSpec) (filler, error) {
	scalar := func(kind string, fill filler) (filler, error) { return fill, expect(column, kind, "") }
	list := func(item string, fill filler) (filler, error) { return fill, expect(column, "list", item) }
	switch column.Name {
	case "Timestamp":
		return scalar("timestamp", func(b array.Builder, s *span, _ *rows) {
			b.(*array.TimestampBuilder).Append(arrow.Timestamp(s.StartTimestamp()))
		})
	case "TraceId":
		return scalar("string", func(b array.Builder, s *span, r *rows) {
			id := s.TraceID()
			r.scratch = hexID(r.scratch, id[:], false)
			str(b).BinaryBuilder.Append(r.scratch)
		})
	case "SpanId":
		return scalar("string", func(b array.Builder, s *span, r *rows) {
			id := s.SpanID()
			r.scratch = hexID(r.scratch, id[:], false)
			str(b).BinaryBuilder.Append(r.scratch)
		})
	case "ParentSpanId":
		return scalar("string", func(b array.Builder, s *span, r *rows) {
			id := s.ParentSpanID()
			r.scratch = hexID(r.scratch, id[:], id.IsEmpty())
			str(b).BinaryBuilder.Append(r.scratch)
		})
	case "TraceState":
		return scalar("string", func(b array.Builder, s *span, _ *rows) { appendText(str(b), s.TraceState().AsRaw()) })
	case "SpanName":
		return scalar("string", func(b array.Builder, s *span, _ *rows) { appendText(str(b), s.Name()) })
	case "SpanKind":
		return scalar("string", func(b array.Builder, s *span, r *rows) {
			name, ok := r.format.spanKinds[int32(s.Kind())]
			if !ok {
				name = r.format.SpanKindOther
			}
			str(b).Append(name)
		})
	case "ServiceName":
		return scalar("string", func(b array.Builder, s *span, _ *rows) { appendText(str(b), s.service) })
	case "ResourceAttributes":
		return scalar("map", func(b array.Builder, s *span, _ *rows) {
			mb := b.(*array.MapBuilder)
			mb.Append(true)
			keys, items := str(mb.KeyBuilder()), str(mb.ItemBuilder())
			for i, key := range s.resourceKeys {
				appendText(keys, key)
				items.BinaryBuilder.Append(s.resourceValues[i])
			}
		})
	case "ScopeName":
		return scalar("string", func(b array.Builder, s *span, _ *rows) { appendText(str(b), s.scopeName) })
	case "ScopeVersion":
		return scalar("string", func(b array.Builder, s *span, _ *rows) { appendText(str(b), s.scopeVersion) })
	case "SpanAttributes":
		return scalar("map", func(b array.Builder, s *span, r *rows) {
			appendMap(b.(*array.MapBuilder), s.attributes, r)
		})
	case "Duration":
		return scalar("uint64", func(b array.Builder, s *span, _ *rows) {
			start, end := s.StartTimestamp(), s.EndTimestamp()
			duration := uint64(0)
			if end > start {
				duration = uint64(end - start)
			}
			b.(*array.Uint64Builder).Append(duration)
		})
	case "StatusCode":
		return scalar("string", func(b array.Builder, s *span, r *rows) {
			name, ok := r.format.statusCodes[int32(s.Status().Code())]
			if !ok {
				name = r.format.StatusCodeOther
			}
			str(b).Append(name)
		})
	case "StatusMessage":
		return scalar("string", func(b array.Builder, s *span, _ *rows) { appendText(str(b), s.Status().Message()) })
	case "Events.Timestamp":
		return list("timestamp", func(b array.Builder, s *span, _ *rows) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			values := lb.ValueBuilder().(*array.TimestampBuilder)
			events := s.Events()
			for i := 0; i < events.Len(); i++ {
				values.Append(arrow.Timestamp(events.At(i).Timestamp()))
			}
		})
	case "Events.Name":
		return list("string", func(b array.Builder, s *span, _ *rows) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			values := str(lb.ValueBuilder())
			events := s.Events()
			for i := 0; i < events.Len(); i++ {
				appendText(values, events.At(i).Name())
			}
		})
	case "Events.Attributes":
		return list("map", func(b array.Builder, s *span, r *rows) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			maps := lb.ValueBuilder().(*array.MapBuilder)
			keys, items := str(maps.KeyBuilder()), str(maps.ItemBuilder())
			events := s.Events()
			r.offsets, r.valid = r.offsets[:0], r.valid[:0]
			for i := 0; i < events.Len(); i++ { // the maps' offsets go in at once, after
				r.offsets = append(r.offsets, int32(keys.Len()))
				r.valid = append(r.valid, true)
				r.eventKVs = appendEntries(r.eventKVs[:0], events.At(i).Attributes())
				for _, kv := range r.eventKVs {
					appendText(keys, kv.key)
					r.scratch = renderValue(r.scratch[:0], kv.value)
					items.BinaryBuilder.Append(r.scratch)
				}
			}
			maps.AppendValues(r.offsets, r.valid)
		})
	case "Links.TraceId":
		return list("string", func(b array.Builder, s *span, r *rows) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			values := str(lb.ValueBuilder())
			links := s.Links()
			for i := 0; i < links.Len(); i++ {
				id := links.At(i).TraceID()
				r.scratch = hexID(r.scratch, id[:], false)
				values.BinaryBuilder.Append(r.scratch)
			}
		})
	case "Links.SpanId":
		return list("string", func(b array.Builder, s *span, r *rows) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			values := str(lb.ValueBuilder())
			links := s.Links()
			for i := 0; i < links.Len(); i++ {
				id := links.At(i).SpanID()
				r.scratch = hexID(r.scratch, id[:], false)
				values.BinaryBuilder.Append(r.scratch)
			}
		})
	case "Links.TraceState":
		return list("string", func(b array.Builder, s *span, _ *rows) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			values := str(lb.ValueBuilder())
			links := s.Links()
			for i := 0; i < links.Len(); i++ {
				appendText(values, links.At(i).TraceState().AsRaw())
			}
		})
	case "Links.Attributes":
		return list("map", func(b array.Builder, s *span, r *rows) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			maps := lb.ValueBuilder().(*array.MapBuilder)
			links := s.Links()
			for i := 0; i < links.Len(); i++ {
				r.eventKVs = appendEntries(r.eventKVs[:0], links.At(i).Attributes())
				appendMap(maps, r.eventKVs, r)
			}
		})
	}
	return nil, fmt.Errorf("base column %q is not one this exporter knows how to fill", column.Name)
}

// typedFiller fills a typed column from its attribute, as otel_llm's typed_columns does:
// VARCHAR takes any value (strings as they are, others rendered), BIGINT an int, INTEGER an
// int within 32 bits, BOOLEAN a bool, TIMESTAMP_NS an int (ns since the epoch), BIGINT[] an
// array of ints; any other value is NULL. An otel-llm span without the attribute gets the
// column's default.
func typedFiller(plan typedSpec, i int, column fieldSpec) (filler, error) {
	var dflt *bool = plan.Default
	if dflt != nil && plan.SQLType != "BOOLEAN" {
		return nil, fmt.Errorf("typed column %q has a default, which this exporter applies to "+
			"BOOLEAN columns only", plan.Column)
	}
	switch plan.SQLType {
	case "VARCHAR":
		return func(b array.Builder, s *span, r *rows) {
			sb := str(b)
			if !s.found[i] || s.typed[i].Type() == pcommon.ValueTypeEmpty {
				sb.AppendNull()
				return
			}
			r.scratch = renderValue(r.scratch[:0], s.typed[i])
			sb.BinaryBuilder.Append(r.scratch)
		}, expect(column, "string", "")
	case "BIGINT":
		return func(b array.Builder, s *span, _ *rows) {
			ib := b.(*array.Int64Builder)
			if s.found[i] && s.typed[i].Type() == pcommon.ValueTypeInt {
				ib.Append(s.typed[i].Int())
				return
			}
			ib.AppendNull()
		}, expect(column, "int64", "")
	case "INTEGER":
		return func(b array.Builder, s *span, _ *rows) {
			ib := b.(*array.Int32Builder)
			if s.found[i] && s.typed[i].Type() == pcommon.ValueTypeInt {
				if n := s.typed[i].Int(); n >= math.MinInt32 && n <= math.MaxInt32 {
					ib.Append(int32(n))
					return
				}
			}
			ib.AppendNull()
		}, expect(column, "int32", "")
	case "BOOLEAN":
		return func(b array.Builder, s *span, _ *rows) {
			bb := b.(*array.BooleanBuilder)
			switch {
			case s.found[i] && s.typed[i].Type() == pcommon.ValueTypeBool:
				bb.Append(s.typed[i].Bool())
			case !s.found[i] && s.ours && dflt != nil:
				bb.Append(*dflt)
			default:
				bb.AppendNull()
			}
		}, expect(column, "bool", "")
	case "TIMESTAMP_NS":
		return func(b array.Builder, s *span, _ *rows) {
			tb := b.(*array.TimestampBuilder)
			if s.found[i] && s.typed[i].Type() == pcommon.ValueTypeInt {
				tb.Append(arrow.Timestamp(s.typed[i].Int()))
				return
			}
			tb.AppendNull()
		}, expect(column, "timestamp", "")
	case "BIGINT[]":
		return func(b array.Builder, s *span, _ *rows) {
			lb := b.(*array.ListBuilder)
			if !s.found[i] || s.typed[i].Type() != pcommon.ValueTypeSlice {
				lb.AppendNull()
				return
			}
			items := s.typed[i].Slice()
			for k := 0; k < items.Len(); k++ {
				if items.At(k).Type() != pcommon.ValueTypeInt {
					lb.AppendNull() // as the Python writer: a list of ints or nothing
					return
				}
			}
			lb.Append(true)
			values := lb.ValueBuilder().(*array.Int64Builder)
			for k := 0; k < items.Len(); k++ {
				values.Append(items.At(k).Int())
			}
		}, expect(column, "list", "int64")
	}
	return nil, fmt.Errorf("typed column %q has a type this exporter does not fill: %s", plan.Column, plan.SQLType)
}

// chunkFiller fills the typed arrays of the chunk events: per chunk event its index, its gap
// (NULL where the attribute is not an int) and its arrival in ns from the span's start.
func chunkFiller(plan chunkSpec, column fieldSpec) (filler, error) {
	if err := expect(column, "list", "int64"); err != nil {
		return nil, err
	}
	attribute := ""
	switch column.Name {
	case plan.IndexColumn:
		attribute = plan.IndexAttribute
	case plan.GapColumn:
		attribute = plan.GapAttribute
	case plan.OffsetColumn:
		return func(b array.Builder, s *span, _ *rows) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			values := lb.ValueBuilder().(*array.Int64Builder)
			start := int64(s.StartTimestamp())
			events := s.Events()
			for i := 0; i < events.Len(); i++ {
				event := events.At(i)
				if event.Name() == plan.Event {
					values.Append(int64(event.Timestamp()) - start)
				}
			}
		}, nil
	default:
		return nil, fmt.Errorf("chunk column %q is not in the chunk plan", column.Name)
	}
	return func(b array.Builder, s *span, _ *rows) {
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		values := lb.ValueBuilder().(*array.Int64Builder)
		events := s.Events()
		for i := 0; i < events.Len(); i++ {
			event := events.At(i)
			if event.Name() != plan.Event {
				continue
			}
			var last pcommon.Value
			found := false
			for k, v := range event.Attributes().All() { // the last of a key sent twice wins
				if k == attribute {
					last, found = v, true
				}
			}
			if found && last.Type() == pcommon.ValueTypeInt {
				values.Append(last.Int())
			} else {
				values.AppendNull()
			}
		}
	}, nil
}

// maxSegmentText bounds the text one column of a segment holds: a segment is sealed at once
// when a column reaches it, as at segment_spans. Arrow's strings have 32-bit offsets, so a
// column past 2 GiB (a burst of requests of large attribute values in one seal interval) cannot
// be encoded: the seal failed, and every export in it ("slice bounds out of range").
var maxSegmentText = 512 << 20

// textBytes is the most text any one column holds so far.
func (r *rows) textBytes() int {
	most := 0
	for i := range r.fillers {
		most = max(most, builderText(r.builder.Field(i)))
	}
	return most
}

func builderText(b array.Builder) int {
	switch b := b.(type) {
	case *array.StringBuilder:
		return b.DataLen()
	case *array.MapBuilder:
		return max(builderText(b.KeyBuilder()), builderText(b.ItemBuilder()))
	case *array.ListBuilder:
		return builderText(b.ValueBuilder())
	}
	return 0
}

// record hands over what was appended as one record (the builder starts empty again).
func (r *rows) record() arrow.RecordBatch {
	r.count = 0
	return r.builder.NewRecordBatch()
}

// shape is how many values (and string bytes) a column and its children held: the next
// segment's builders reserve that much at once instead of growing by doubling.
type shape struct {
	values   int
	bytes    int
	children []shape
}

func shapeOf(a arrow.Array) shape {
	switch a := a.(type) {
	case *array.Map:
		return shape{values: a.Len(), children: []shape{shapeOf(a.Keys()), shapeOf(a.Items())}}
	case *array.List:
		return shape{values: a.Len(), children: []shape{shapeOf(a.ListValues())}}
	case *array.String:
		return shape{values: a.Len(), bytes: len(a.ValueBytes())}
	}
	return shape{values: a.Len()}
}

// shapesOf is the shape of each column of rec.
func shapesOf(rec arrow.RecordBatch) []shape {
	shapes := make([]shape, rec.NumCols())
	for i, column := range rec.Columns() {
		shapes[i] = shapeOf(column)
	}
	return shapes
}

func reserve(b array.Builder, s shape) {
	switch b := b.(type) {
	case *array.MapBuilder:
		b.Reserve(s.values)
		if len(s.children) == 2 {
			reserve(b.KeyBuilder(), s.children[0])
			reserve(b.ItemBuilder(), s.children[1])
			b.ValueBuilder().Reserve(s.children[0].values)
		}
	case *array.ListBuilder:
		b.Reserve(s.values)
		if len(s.children) == 1 {
			reserve(b.ValueBuilder(), s.children[0])
		}
	case *array.StringBuilder:
		b.Reserve(s.values)
		b.ReserveData(s.bytes)
	default:
		b.Reserve(s.values)
	}
}

// reserveLike makes room for a segment shaped as shapes (an earlier segment's).
func (r *rows) reserveLike(shapes []shape) {
	if len(shapes) != len(r.fillers) {
		return
	}
	for i, s := range shapes {
		reserve(r.builder.Field(i), s)
	}
}
