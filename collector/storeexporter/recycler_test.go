package storeexporter

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
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
	r.Free(make([]byte, 100)) // not a class of its own: left to the garbage collector
	if got := r.keptBytes(); got != 3*4096 {
		t.Fatalf("kept %d bytes after a foreign buffer", got)
	}
	grown := r.Reallocate(10_000, r.Allocate(4096))
	if len(grown) != 10_000 || cap(grown) != 16384 || r.keptBytes() != 3*4096 {
		t.Fatalf("reallocated: len %d cap %d, kept %d", len(grown), cap(grown), r.keptBytes())
	}
}

// encodeWith is the segment of sampleTraces(30) x copies, its rows built and encoded in mem.
func encodeWith(t *testing.T, mem memory.Allocator, copies int) []byte {
	t.Helper()
	format := mustFormat(t)
	r, err := newRows(format, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer r.release()
	td := sampleTraces(30)
	for k := 0; k < copies; k++ {
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

// A segment built and encoded in recycled memory is byte for byte the one Go's allocator
// gives, however often the memory was used before: freed buffers are poisoned, so a buffer
// freed while Arrow or Parquet still read it would change the bytes.
func TestSegmentsInRecycledMemoryAreTheSameBytes(t *testing.T) {
	for _, copies := range []int{3, 200} { // a small (snappy) and a large (zstd) segment
		want := encodeWith(t, memory.NewGoAllocator(), copies)
		mem := newRecycler(64 << 20)
		mem.poison = true
		checked := memory.NewCheckedAllocator(mem)
		for round := 0; round < 4; round++ {
			if got := encodeWith(t, checked, copies); !bytes.Equal(got, want) {
				t.Fatalf("%d rows, round %d: the segment differs from Go's allocator's", copies, round)
			}
		}
		checked.AssertSize(t, 0) // every buffer handed back
		if mem.keptBytes() == 0 {
			t.Fatalf("%d rows: nothing was recycled", copies)
		}
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
