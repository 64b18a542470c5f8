package storeexporter

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
)

// schemaJSON is the segment format as otel_llm writes it
// (`python -m otel_llm._show._store._schema_export`): Python owns the format, this package
// reads it and never lists a column of its own.
//
//go:embed schema.json
var schemaJSON []byte

type fieldSpec struct {
	Name     string     `json:"name"`
	Nullable bool       `json:"nullable"`
	Type     string     `json:"type"`
	Unit     string     `json:"unit"`
	Key      *fieldSpec `json:"key"`
	Value    *fieldSpec `json:"value"`
	Item     *fieldSpec `json:"item"`
	SQLType  string     `json:"sql_type"`
	Role     string     `json:"role"`
}

type typedSpec struct {
	Column    string `json:"column"`
	Attribute string `json:"attribute"`
	SQLType   string `json:"sql_type"`
	Default   *bool  `json:"default"`
}

type chunkSpec struct {
	Event          string `json:"event"`
	IndexAttribute string `json:"index_attribute"`
	GapAttribute   string `json:"gap_attribute"`
	IndexColumn    string `json:"index_column"`
	GapColumn      string `json:"gap_column"`
	OffsetColumn   string `json:"offset_column"`
}

type encodingSpec struct {
	SmallSegmentRows int    `json:"small_segment_rows"`
	SmallCompression string `json:"small_compression"`
	SmallDictionary  bool   `json:"small_dictionary"`
	SmallStatistics  bool   `json:"small_statistics"`
	Compression      string `json:"compression"`
	PageChecksums    bool   `json:"page_checksums"`
	RowGroups        int    `json:"row_groups"`
}

type storeSpec struct {
	Marker           string  `json:"marker"`
	MarkerFormat     string  `json:"marker_format"`
	Segments         string  `json:"segments"`
	Generations      string  `json:"generations"`
	GenerationDigits int     `json:"generation_digits"`
	Tmp              string  `json:"tmp"`
	Consumed         string  `json:"consumed"`
	Carried          string  `json:"carried"`
	SchemaSegment    string  `json:"schema_segment"`
	CompactionLock   string  `json:"compaction_lock"`
	PublishLock      string  `json:"publish_lock"`
	PendingPrefix    string  `json:"pending_prefix"`
	TemporaryPattern string  `json:"temporary_pattern"`
	OrphanDeadAfterS float64 `json:"orphan_dead_after_s"`
}

// segmentFormat is schema.json: the columns, the typed plan, the chunk plan, the spellings
// of kinds and statuses, the encoding and the store's layout.
type segmentFormat struct {
	SchemaVersion        int               `json:"schema_version"`
	Layout               int               `json:"layout"`
	Columns              []fieldSpec       `json:"columns"`
	Typed                []typedSpec       `json:"typed"`
	TypedDefaultsWhen    string            `json:"typed_defaults_when"`
	ServiceNameAttribute string            `json:"service_name_attribute"`
	Chunks               chunkSpec         `json:"chunks"`
	SpanKinds            map[string]string `json:"span_kinds"`
	SpanKindOther        string            `json:"span_kind_other"`
	StatusCodes          map[string]string `json:"status_codes"`
	StatusCodeOther      string            `json:"status_code_other"`
	Encoding             encodingSpec      `json:"encoding"`
	Store                storeSpec         `json:"store"`

	schema          *arrow.Schema
	listLeafOptions []parquet.WriterProperty
	spanKinds       map[int32]string
	statusCodes     map[int32]string
}

func loadFormat(data []byte) (*segmentFormat, error) {
	var f segmentFormat
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("schema.json does not parse: %w", err)
	}
	if len(f.Columns) == 0 {
		return nil, fmt.Errorf("schema.json names no columns")
	}
	fields := make([]arrow.Field, 0, len(f.Columns))
	for i := range f.Columns {
		field, err := arrowField(&f.Columns[i])
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Columns[i].Name, err)
		}
		fields = append(fields, field)
	}
	f.schema = arrow.NewSchema(fields, nil)
	var err error
	if f.listLeafOptions, err = listLeafOptions(f.schema); err != nil {
		return nil, err
	}
	if f.spanKinds, err = numbered(f.SpanKinds); err != nil {
		return nil, err
	}
	if f.statusCodes, err = numbered(f.StatusCodes); err != nil {
		return nil, err
	}
	return &f, nil
}

func numbered(names map[string]string) (map[int32]string, error) {
	out := make(map[int32]string, len(names))
	for key, name := range names {
		n, err := strconv.ParseInt(key, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("schema.json: %q is not a number", key)
		}
		out[int32(n)] = name
	}
	return out, nil
}

func arrowField(spec *fieldSpec) (arrow.Field, error) {
	kind, err := arrowType(spec)
	if err != nil {
		return arrow.Field{}, err
	}
	return arrow.Field{Name: spec.Name, Type: kind, Nullable: spec.Nullable}, nil
}

func arrowType(spec *fieldSpec) (arrow.DataType, error) {
	switch spec.Type {
	case "string":
		return arrow.BinaryTypes.String, nil
	case "uint64":
		return arrow.PrimitiveTypes.Uint64, nil
	case "int64":
		return arrow.PrimitiveTypes.Int64, nil
	case "int32":
		return arrow.PrimitiveTypes.Int32, nil
	case "bool":
		return arrow.FixedWidthTypes.Boolean, nil
	case "timestamp":
		if spec.Unit != "ns" {
			return nil, fmt.Errorf("a timestamp in %q, not ns", spec.Unit)
		}
		return &arrow.TimestampType{Unit: arrow.Nanosecond}, nil
	case "list":
		if spec.Item == nil {
			return nil, fmt.Errorf("a list without an item")
		}
		item, err := arrowField(spec.Item)
		if err != nil {
			return nil, err
		}
		return arrow.ListOfField(item), nil
	case "map":
		if spec.Key == nil || spec.Value == nil {
			return nil, fmt.Errorf("a map without a key or a value")
		}
		if spec.Key.Type != "string" || spec.Value.Type != "string" || spec.Key.Nullable {
			return nil, fmt.Errorf("a map other than Map(String not null, String)")
		}
		m := arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)
		m.SetItemNullable(spec.Value.Nullable)
		return m, nil
	}
	return nil, fmt.Errorf("an Arrow type this exporter does not know: %q", spec.Type)
}
