package storeexporter

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A Collector killed between sealing a segment and answering its senders has stored spans that
// the senders were not told about: they send them again to the next Collector. So that no span
// lands twice, a starting exporter reads the ids of the spans the store got within the last
// ResendWindow (segments changed since then); it remembers them with those it stores itself
// (stored.go).

type spanKey [24]byte

// keyOf is s's (TraceId, SpanId); not ok when either is all zeros: an id an SDK never sends
// (OTLP calls it invalid), which every span sent without ids shares, so it cannot tell a span
// sent again from a new one. Such spans are stored as they come.
func keyOf(s ptrace.Span) (spanKey, bool) {
	t, id := s.TraceID(), s.SpanID()
	return makeKey(t[:], id[:])
}

func makeKey(trace, span []byte) (spanKey, bool) {
	var k spanKey
	copy(k[:16], trace)
	copy(k[16:], span)
	var zeros [16]byte
	return k, string(k[:16]) != string(zeros[:]) && string(k[16:]) != string(zeros[:8])
}

// recentSpans are the (TraceId, SpanId) of the rows of the current generation's segments
// modified after since, newest segments first, until limit ids are known. A segment that
// cannot be read (damaged, not Parquet) is left out, the others read: skipped says which.
func (s *store) recentSpans(since time.Time, limit int) (map[spanKey]struct{}, []string, error) {
	n, err := s.current()
	if err != nil {
		return nil, nil, err
	}
	dir := s.generationDir(n)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	type recent struct {
		name string
		at   time.Time
	}
	var found []recent
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".parquet") || strings.HasPrefix(name, ".") || name == s.spec.SchemaSegment {
			continue
		}
		info, err := e.Info()
		if err != nil || info.ModTime().Before(since) {
			continue
		}
		found = append(found, recent{name, info.ModTime()})
	}
	slices.SortFunc(found, func(a, b recent) int { return b.at.Compare(a.at) }) // newest first
	seen := make(map[spanKey]struct{})
	var skipped []string
	for _, r := range found {
		if len(seen) >= limit {
			break
		}
		if err := readKeys(filepath.Join(dir, r.name), seen, limit); err != nil {
			skipped = append(skipped, r.name+": "+err.Error())
		}
	}
	return seen, skipped, nil
}

// readKeys adds the ids of path's rows to into, last rows first (a merged segment holds its
// newest spans last), until into holds limit.
func readKeys(path string, into map[spanKey]struct{}, limit int) error {
	reader, err := file.OpenParquetFile(path, false)
	if err != nil {
		if os.IsNotExist(err) {
			return nil // merged away meanwhile: its spans are in the merged segment
		}
		return err
	}
	defer reader.Close()
	schema := reader.MetaData().Schema
	traceAt, spanAt := schema.ColumnIndexByName("TraceId"), schema.ColumnIndexByName("SpanId")
	if traceAt < 0 || spanAt < 0 {
		return nil
	}
	fr, err := pqarrow.NewFileReader(reader, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	groups := make([]int, reader.NumRowGroups())
	for i := range groups {
		groups[i] = i
	}
	table, err := fr.ReadRowGroups(context.Background(), []int{traceAt, spanAt}, groups)
	if err != nil {
		return err
	}
	defer table.Release()
	var traceIDs, spanIDs []string
	for _, chunk := range table.Column(0).Data().Chunks() {
		ts := chunk.(*array.String)
		for i := 0; i < ts.Len(); i++ {
			traceIDs = append(traceIDs, ts.Value(i))
		}
	}
	for _, chunk := range table.Column(1).Data().Chunks() {
		ss := chunk.(*array.String)
		for i := 0; i < ss.Len(); i++ {
			spanIDs = append(spanIDs, ss.Value(i))
		}
	}
	for i := min(len(traceIDs), len(spanIDs)) - 1; i >= 0 && len(into) < limit; i-- {
		trace, err := hex.DecodeString(traceIDs[i])
		if err != nil || len(trace) != 16 {
			continue
		}
		span, err := hex.DecodeString(spanIDs[i])
		if err != nil || len(span) != 8 {
			continue
		}
		if k, ok := makeKey(trace, span); ok {
			into[k] = struct{}{}
		}
	}
	return nil
}
