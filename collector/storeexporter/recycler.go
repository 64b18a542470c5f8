package storeexporter

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is an Arrow allocator that keeps the buffers Arrow frees and hands them out again,
// so the next segment's columns and Parquet pages are built in the memory the last one used
// instead of in new memory the garbage collector must clear and later collect. A buffer is
// 64-byte aligned and its capacity a power of two (its size class); it comes out zeroed to its
// capacity, as Go's allocator gives it. At most `limit` bytes are kept free.
type recycler struct {
	mu     sync.Mutex
	free   [maxClass + 1][][]byte
	kept   int // bytes in free
	limit  int
	poison bool // tests: freed buffers are overwritten, so a use after free shows in the output
}

const (
	minClass = 6  // 64 bytes
	maxClass = 30 // 1 GiB: larger buffers are Go's allocator's alone
)

var _ memory.Allocator = (*recycler)(nil)

func newRecycler(limit int) *recycler { return &recycler{limit: limit} }

func sizeClass(size int) int {
	if size <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(size - 1))
}

func (r *recycler) Allocate(size int) []byte {
	class := sizeClass(size)
	if size <= 0 || class > maxClass {
		return memory.NewGoAllocator().Allocate(size)
	}
	r.mu.Lock()
	list := r.free[class]
	if n := len(list); n > 0 {
		buf := list[n-1]
		r.free[class] = list[:n-1]
		r.kept -= len(buf)
		r.mu.Unlock()
		clear(buf)
		return buf[:size]
	}
	r.mu.Unlock()
	capacity := 1 << class
	raw := make([]byte, capacity+64)
	shift := int(-uintptr(unsafe.Pointer(&raw[0])) & 63)
	return raw[shift : shift+size : shift+capacity]
}

func (r *recycler) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		return b[:size]
	}
	grown := r.Allocate(size)
	copy(grown, b)
	r.Free(b)
	return grown
}

func (r *recycler) Free(b []byte) {
	capacity := cap(b)
	if capacity < 1<<minClass || capacity > 1<<maxClass || capacity&(capacity-1) != 0 {
		return // not one of this allocator's classes: the garbage collector's
	}
	b = b[:capacity]
	if uintptr(unsafe.Pointer(&b[0]))&63 != 0 {
		return
	}
	if r.poison {
		for i := range b {
			b[i] = 0xA5
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kept+capacity > r.limit {
		return
	}
	class := bits.Len(uint(capacity)) - 1
	r.free[class] = append(r.free[class], b)
	r.kept += capacity
}

// keptBytes is how many bytes wait free.
func (r *recycler) keptBytes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kept
}

// recycledBytes is the most a store exporter keeps free between segments.
const recycledBytes = 128 << 20
