package storeexporter

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// encodeSegment writes rec as the bytes of one segment: one row group, encoded as the Python
// writer encodes (schema.json's "encoding"): a small segment plainly (snappy, no dictionaries,
// no statistics: compaction re-encodes it later), a larger one with zstd. Its footer stores the
// Arrow schema, as pyarrow's do: readers read segments that stored the same one as one list.
func encodeSegment(format *segmentFormat, rec arrow.RecordBatch) ([]byte, error) {
	return encodeSegmentInto(format, rec, 0, memory.DefaultAllocator)
}

// encodeSegmentInto is encodeSegment into a buffer that starts with room for sizeHint bytes
// (what a segment of as many rows took last time), so it is not grown by doubling and copying.
func encodeSegmentInto(format *segmentFormat, rec arrow.RecordBatch, sizeHint int,
	mem memory.Allocator) ([]byte, error) {
	enc := format.Encoding
	rows := max(int64(1), rec.NumRows())
	options := []parquet.WriterProperty{parquet.WithMaxRowGroupLength(rows), parquet.WithAllocator(mem)}
	if rows < int64(enc.SmallSegmentRows) {
		codec, err := codecNamed(enc.SmallCompression)
		if err != nil {
			return nil, err
		}
		options = append(options, parquet.WithCompression(codec),
			parquet.WithDictionaryDefault(enc.SmallDictionary), parquet.WithStats(enc.SmallStatistics))
	} else {
		codec, err := codecNamed(enc.Compression)
		if err != nil {
			return nil, err
		}
		// level 1, Arrow C++'s (pyarrow's) default for zstd; Go's default is slower for little gain
		options = append(options, parquet.WithCompression(codec), parquet.WithCompressionLevel(1))
		options = append(options, format.listLeafOptions...)
	}
	out := bytes.NewBuffer(make([]byte, 0, sizeHint))
	writer, err := pqarrow.NewFileWriter(format.schema, out, parquet.NewWriterProperties(options...),
		pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, fmt.Errorf("cannot start a segment: %w", err)
	}
	if err := writer.Write(rec); err != nil {
		writer.Close()
		return nil, fmt.Errorf("cannot encode a segment: %w", err)
	}
	if err := writer.Close(); err != nil {
		return nil, fmt.Errorf("cannot finish a segment: %w", err)
	}
	return out.Bytes(), nil
}

// listLeafOptions turns dictionaries and statistics off for the values inside list columns
// (the events, links and chunk arrays: nearly all of a segment's values, mostly distinct, and
// never filtered on by min/max): a sixth of the encoding's CPU. Top-level columns and the
// attribute maps keep both, as pyarrow writes them.
func listLeafOptions(sc *arrow.Schema) ([]parquet.WriterProperty, error) {
	pq, err := pqarrow.ToParquet(sc, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, err
	}
	var options []parquet.WriterProperty
	for i := 0; i < pq.NumColumns(); i++ {
		path := pq.Column(i).ColumnPath()
		fields := sc.FieldIndices(path[0])
		if len(fields) == 1 && sc.Field(fields[0]).Type.ID() == arrow.LIST {
			options = append(options, parquet.WithDictionaryPath(path, false), parquet.WithStatsPath(path, false))
		}
	}
	return options, nil
}

func codecNamed(name string) (compress.Compression, error) {
	switch name {
	case "zstd":
		return compress.Codecs.Zstd, nil
	case "snappy":
		return compress.Codecs.Snappy, nil
	case "none":
		return compress.Codecs.Uncompressed, nil
	}
	return compress.Codecs.Uncompressed, fmt.Errorf("schema.json names a compression this exporter lacks: %q", name)
}
