package storeexporter

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// encodeSegment writes rec as the bytes of one segment: one row group, encoded as the Python
// writer encodes (schema.json's "encoding"): a small segment plainly (snappy, no dictionaries,
// no statistics: compaction re-encodes it later), a larger one with zstd.
func encodeSegment(format *segmentFormat, rec arrow.RecordBatch) ([]byte, error) {
	enc := format.Encoding
	rows := max(int64(1), rec.NumRows())
	options := []parquet.WriterProperty{parquet.WithMaxRowGroupLength(rows)}
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
		options = append(options, parquet.WithCompression(codec))
	}
	var out bytes.Buffer
	writer, err := pqarrow.NewFileWriter(format.schema, &out, parquet.NewWriterProperties(options...),
		pqarrow.DefaultWriterProps())
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
