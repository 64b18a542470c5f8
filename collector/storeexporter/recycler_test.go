package storeexporter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
)

func aligned(b []byte) bool { return uintptr(unsafe.Pointer(&b[0]))&63 == 0 }

func TestTheRecyclerHandsOutZeroedAlignedBuffersOfItsClasses(t *testing.T) {
	r := newRecycler(1 << 20)
	for _, size := range []int{1, 63, 64, 65, 1000, 4096, 100_000} {
		b := r.Allocate(size)
		if len(b) != size || cap(b) != 1<<sizeClass(size) || cap(b) < size || !aligned(b) {
			t.Fatalf("size %d: len %d cap %d aligned %v", size, len(b), cap(b), aligned(b))
		}
		for i := range b {
			b[i] = 0xFF
		}
		r.Free(b)
		again := r.Allocate(size)
		if &again[0] != &b[0] {
			t.Fatalf("size %d: the freed buffer was not handed out again", size)
		}
		for i, c := range again[:cap(again)] {
			if c != 0 {
				t.Fatalf("size %d: byte %d of a reused buffer is %#x, not zero", size, i, c)
			}
		}
	}
}

func TestTheRecyclerKeepsNoMoreThanItsLimit(t *testing.T) {
	r := newRecycler(3 * 4096)
	buffers := [][]byte{r.Allocate(4096), r.Allocate(4096), r.Allocate(4096), r.Allocate(4096)}
	for _, b := range buffers {
		r.Free(b)
	}
	if got := r.keptBytes(); got != 3*4096 {
		t.Fatalf("kept %d bytes, limit %d", got, 3*4096)
	}
	grown := r.Reallocate(10_000, r.Allocate(4096))
	if len(grown) != 10_000 || cap(grown) != 16384 || r.keptBytes() != 3*4096 {
		t.Fatalf("reallocated: len %d cap %d, kept %d", len(grown), cap(grown), r.keptBytes())
	}
}

func TestTheRecyclerTakesBackOnlyWhatItHandedOut(t *testing.T) {
	r := newRecycler(1 << 20)
	foreign := memory.NewGoAllocator().Allocate(4096) // aligned, a power of two: still not ours
	r.Free(foreign)
	r.Free(make([]byte, 100))
	if got := r.keptBytes(); got != 0 {
		t.Fatalf("kept %d bytes of buffers it never handed out", got)
	}
	b := r.Allocate(4096)
	r.Free(b)
	r.Free(b) // a second free of the same buffer
	if got := r.keptBytes(); got != 4096 {
		t.Fatalf("kept %d bytes after freeing one buffer twice", got)
	}
	first, second := r.Allocate(4096), r.Allocate(4096)
	if &first[0] == &second[0] {
		t.Fatal("one buffer handed out twice")
	}
}

func TestTrimLetsABurstsMemoryGo(t *testing.T) {
	r := newRecycler(64 << 20)
	var burst [][]byte
	for i := 0; i < 10; i++ {
		burst = append(burst, r.Allocate(64<<10))
	}
	for _, b := range burst {
		r.Free(b)
	}
	r.trim() // the burst's segment: it had all of them out at once
	if got := r.keptBytes(); got != 10*(64<<10) {
		t.Fatalf("kept %d bytes after the burst's own segment", got)
	}
	small := r.Allocate(1000) // the next segment is small
	r.Free(small)
	r.trim()
	if got := r.keptBytes(); got > 1024 {
		t.Fatalf("kept %d bytes after a segment that needed 1,024", got)
	}
}

// encodeWith is the segment of sampleTraces(30) x copies, its rows built and encoded in mem;
// with distinct, each span gets an attribute of 3.5 kB no other span has (a dictionary that
// outgrows its page and falls back to plain, columns of several pages).
func encodeWith(t *testing.T, mem memory.Allocator, copies int, distinct bool) []byte {
	t.Helper()
	format := mustFormat(t)
	r, err := newRows(format, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	td := sampleTraces(30)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for k := 0; k < copies; k++ {
		if distinct {
			for j := 0; j < spans.Len(); j++ {
				spans.At(j).Attributes().PutStr("gen_ai.response.id",
					strings.Repeat(fmt.Sprintf("%d-%06d ", j, k), 350))
			}
		}
		r.appendTraces(td, nil)
	}
	rec := r.record()
	defer rec.Release()
	data, err := encodeSegmentInto(format, rec, 0, mem)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// sameSegment fails unless got is want but for the order of each column's page-encoding
// statistics, which arrow-go writes from a map (so in any order, whatever the allocator): the
// pages byte for byte, and per column chunk its values, sizes, encodings and statistics.
func sameSegment(t *testing.T, what string, want, got []byte) {
	t.Helper()
	footer := func(data []byte) int { // the footer and its length and magic at the end
		return int(binary.LittleEndian.Uint32(data[len(data)-8:])) + 8
	}
	if len(got) != len(want) || footer(got) != footer(want) ||
		!bytes.Equal(got[:len(got)-footer(got)], want[:len(want)-footer(want)]) {
		t.Fatalf("%s: the pages differ from Go's allocator's", what)
	}
	describe := func(data []byte) []string {
		reader, err := file.NewParquetReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := 0; i < reader.MetaData().Schema.NumColumns(); i++ {
			chunk, err := reader.MetaData().RowGroup(0).ColumnChunk(i)
			if err != nil {
				t.Fatal(err)
			}
			line := fmt.Sprintf("%s %d values %d/%d bytes %v", chunk.PathInSchema(), chunk.NumValues(),
				chunk.TotalCompressedSize(), chunk.TotalUncompressedSize(), chunk.Encodings())
			if set, _ := chunk.StatsSet(); set {
				stats, err := chunk.Statistics()
				if err != nil {
					t.Fatal(err)
				}
				line += fmt.Sprintf(" nulls %d", stats.NullCount())
				if stats.HasMinMax() {
					line += fmt.Sprintf(" min %x max %x", stats.EncodeMin(), stats.EncodeMax())
				}
			}
			out = append(out, line)
		}
		return out
	}
	if a, b := describe(want), describe(got); !slices.Equal(a, b) {
		t.Fatalf("%s: the column chunks differ from Go's allocator's:\n%v\n%v", what, a, b)
	}
}

// A segment built and encoded in recycled memory is the one Go's allocator gives (sameSegment),
// however often the memory was used before: freed buffers are poisoned, so a buffer freed
// while Arrow or Parquet still read it would change a page or a statistic.
func TestSegmentsInRecycledMemoryAreTheSameBytes(t *testing.T) {
	cases := []struct {
		copies   int
		distinct bool
	}{{3, false}, {200, false}, {400, true}} // small (snappy), large (zstd), large and distinct
	for _, c := range cases {
		want := encodeWith(t, memory.NewGoAllocator(), c.copies, c.distinct)
		mem := newRecycler(64 << 20)
		mem.poison = true
		checked := memory.NewCheckedAllocator(mem)
		for round := 0; round < 4; round++ {
			sameSegment(t, fmt.Sprintf("%+v, round %d", c, round), want,
				encodeWith(t, checked, c.copies, c.distinct))
			mem.trim()
		}
		checked.AssertSize(t, 0) // every buffer handed back
		if mem.keptBytes() == 0 {
			t.Fatalf("%+v: nothing was recycled", c)
		}
	}
	reader, err := file.NewParquetReader(bytes.NewReader(encodeWith(t, memory.NewGoAllocator(), 400, true)))
	if err != nil {
		t.Fatal(err)
	}
	largest := int64(0)
	for i := 0; i < reader.MetaData().Schema.NumColumns(); i++ {
		chunk, err := reader.MetaData().RowGroup(0).ColumnChunk(i)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, chunk.TotalUncompressedSize())
	}
	if largest < 2<<20 { // a dictionary page and a data page are 1 MiB at most
		t.Fatalf("the distinct segment's largest column is %d bytes: too small to outgrow its pages", largest)
	}
}

func TestTheKeptZstdCodecWritesWhatArrowsWrites(t *testing.T) {
	codec, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	kept, ok := codec.(*keptZstd)
	if !ok {
		t.Fatalf("the registered zstd codec is %T", codec)
	}
	page := bytes.Repeat([]byte("otel_llm.chunk.gap_ns 1000 otel_llm.chunk.index 7 "), 5000)
	for _, level := range []int{1, 3, compress.DefaultCompressionLevel} {
		want := kept.Codec.EncodeLevel(nil, page, level)
		for round := 0; round < 3; round++ { // a new encoder, then kept ones
			got := kept.EncodeLevel(nil, page, level)
			if !bytes.Equal(got, want) {
				t.Fatalf("level %d, round %d: %d bytes, arrow-go's codec wrote %d", level, round, len(got), len(want))
			}
			back, err := kept.DecodeWithError(nil, got)
			if err != nil || !bytes.Equal(back, page) {
				t.Fatalf("level %d: decoded %d bytes (%v)", level, len(back), err)
			}
		}
	}
	kept.mu.Lock()
	defer kept.mu.Unlock()
	for level, idle := range kept.idle {
		if len(idle) == 0 || len(idle) > keptEncoders {
			t.Fatalf("level %v: %d encoders kept", level, len(idle))
		}
	}
}
