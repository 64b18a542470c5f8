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
// capacity, as Go's allocator gives it. Only buffers it handed out and that are still out are
// taken back (a foreign slice or a second free of the same buffer is left to the garbage
// collector). What it keeps free is at most `limit` bytes, and after each segment (trim) no
// more than the most that segment had out at once.
type recycler struct {
	mu     sync.Mutex
	free   [maxClass + 1][][]byte
	out    map[*byte]struct{} // the buffers handed out and not yet freed, by first byte
	kept   int                // bytes in free
	inUse  int                // bytes of the buffers out
	peak   int                // the most inUse since the last trim
	limit  int
	poison bool // tests: freed buffers are overwritten, so a use after free shows in the output
}

const (
	minClass = 6  // 64 bytes
	maxClass = 30 // 1 GiB: larger buffers are Go's allocator's alone
	// recycledBytes is the most a store exporter keeps free between segments.
	recycledBytes = 128 << 20
)

var _ memory.Allocator = (*recycler)(nil)

func newRecycler(limit int) *recycler {
	return &recycler{limit: limit, out: make(map[*byte]struct{})}
}

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
	capacity := 1 << class
	r.mu.Lock()
	var buf []byte
	if list := r.free[class]; len(list) > 0 {
		buf = list[len(list)-1]
		r.free[class] = list[:len(list)-1]
		r.kept -= capacity
	}
	r.mu.Unlock()
	if buf != nil {
		clear(buf)
	} else {
		raw := make([]byte, capacity+64)
		shift := int(-uintptr(unsafe.Pointer(&raw[0])) & 63)
		buf = raw[shift : shift+capacity : shift+capacity]
	}
	r.mu.Lock()
	r.out[&buf[0]] = struct{}{}
	r.inUse += capacity
	r.peak = max(r.peak, r.inUse)
	r.mu.Unlock()
	return buf[:size]
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
	if capacity == 0 {
		return
	}
	b = b[:capacity]
	r.mu.Lock()
	if _, ours := r.out[&b[0]]; !ours {
		r.mu.Unlock()
		return // not handed out by this allocator, or freed already: the garbage collector's
	}
	delete(r.out, &b[0])
	r.inUse -= capacity
	keep := r.kept+capacity <= r.limit
	if keep {
		r.kept += capacity // counted now; the buffer joins its list below
	}
	r.mu.Unlock()
	if !keep {
		return
	}
	if r.poison {
		for i := range b {
			b[i] = 0xA5
		}
	}
	class := bits.Len(uint(capacity)) - 1
	r.mu.Lock()
	r.free[class] = append(r.free[class], b)
	r.mu.Unlock()
}

// trim lets go of the free buffers beyond the most that were out at once since the last trim
// (the largest first), so a burst's memory is not kept once segments are small again.
func (r *recycler) trim() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for class := maxClass; class >= minClass && r.kept > r.peak; class-- {
		for len(r.free[class]) > 0 && r.kept > r.peak {
			list := r.free[class]
			list[len(list)-1] = nil
			r.free[class] = list[:len(list)-1]
			r.kept -= 1 << class
		}
	}
	r.peak = r.inUse
}

// keptBytes is how many bytes wait free.
func (r *recycler) keptBytes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kept
}
