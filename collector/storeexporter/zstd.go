package storeexporter

import (
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// Parquet's zstd codec with its encoders kept between segments. arrow-go's own keeps them in a
// sync.Pool, which drops what it holds after two garbage collections: in a running Collector
// nearly every segment then builds new encoders, each with a history of a megabyte or more, for
// its pages (a tenth of the bytes the exporter allocated, measured). These are the same
// encoders with the same options, so the bytes written are the same; decoding and streaming
// stay arrow-go's. The registry is arrow-go's, one for the whole binary: any other component
// of the distribution writing zstd Parquet would use this codec too (none does), and get the
// same bytes.

// keptEncoders is the most encoders kept per level: segments are encoded one at a time.
const keptEncoders = 2

type keptZstd struct {
	compress.Codec // arrow-go's: decoding, bounds, the default level
	mu             sync.Mutex
	idle           map[zstd.EncoderLevel][]*zstd.Encoder
}

func init() {
	original, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		panic(err) // arrow-go registers zstd in its own init, which runs before this one
	}
	compress.RegisterCodec(compress.Codecs.Zstd, &keptZstd{
		Codec: original,
		idle:  make(map[zstd.EncoderLevel][]*zstd.Encoder),
	})
}

// EncodeLevel is arrow-go's EncodeLevel with an encoder that outlives garbage collections.
func (z *keptZstd) EncodeLevel(dst, src []byte, level int) []byte {
	compressLevel := zstd.EncoderLevelFromZstd(level)
	if level == compress.DefaultCompressionLevel {
		compressLevel = zstd.SpeedDefault
	}
	enc := z.take(compressLevel)
	if enc == nil {
		return z.Codec.EncodeLevel(dst, src, level) // the options were refused: arrow-go's way
	}
	out := enc.EncodeAll(src, dst[:0])
	z.give(compressLevel, enc)
	return out
}

func (z *keptZstd) take(level zstd.EncoderLevel) *zstd.Encoder {
	z.mu.Lock()
	idle := z.idle[level]
	if n := len(idle); n > 0 {
		enc := idle[n-1]
		z.idle[level] = idle[:n-1]
		z.mu.Unlock()
		return enc
	}
	z.mu.Unlock()
	// arrow-go's options for its pooled encoders (parquet/compress/zstd.go)
	enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(level),
		zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true))
	if err != nil {
		return nil
	}
	return enc
}

func (z *keptZstd) give(level zstd.EncoderLevel, enc *zstd.Encoder) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.idle[level]) < keptEncoders {
		z.idle[level] = append(z.idle[level], enc)
	}
}

// DecodeWithError, NewReader, NewWriter, NewWriterLevel: arrow-go's, which the embedded
// interface does not expose (parquet asks for them by type assertion).
func (z *keptZstd) DecodeWithError(dst, src []byte) ([]byte, error) {
	return compress.Decode(z.Codec, dst, src)
}

func (z *keptZstd) NewReader(r io.Reader) io.ReadCloser {
	return z.Codec.(compress.StreamingCodec).NewReader(r)
}

func (z *keptZstd) NewWriter(w io.Writer) io.WriteCloser {
	return z.Codec.(compress.StreamingCodec).NewWriter(w)
}

func (z *keptZstd) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return z.Codec.(compress.StreamingCodec).NewWriterLevel(w, level)
}

var (
	_ compress.ErrorCodec     = (*keptZstd)(nil)
	_ compress.StreamingCodec = (*keptZstd)(nil)
)
