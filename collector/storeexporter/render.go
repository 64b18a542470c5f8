package storeexporter

import (
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// The rendering of attribute values into the store's Map(String, String) columns: what
// otel_llm's attribute_string (otel_llm/_show/_store/_rows.py) makes of the Python value the
// SDK held, so a Go-written row equals the embedded writer's and the Python ingest's.
//
//   string -> itself; int -> decimal; bool -> true/false; double -> Python's repr(float);
//   bytes -> lowercase hex; array -> json.dumps(list, separators=(",", ":")) (ASCII only);
//   kvlist -> Python's str(dict); an empty value -> "None".
//
// Python cannot render a bytes value inside an array as JSON (it raises); here it is the
// JSON string of its hex.

// renderValue appends the string form of v to buf.
func renderValue(buf []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendValidText(buf, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(buf, v.Int(), 10)
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	case pcommon.ValueTypeDouble:
		return appendFloatRepr(buf, v.Double())
	case pcommon.ValueTypeBytes:
		return hex.AppendEncode(buf, v.Bytes().AsRaw())
	case pcommon.ValueTypeSlice:
		return appendJSONSlice(buf, v.Slice())
	case pcommon.ValueTypeMap:
		return appendReprMap(buf, v.Map())
	}
	return append(buf, "None"...)
}

// appendValidText appends s, each run of bytes that is not UTF-8 as U+FFFD (see appendText).
func appendValidText(buf []byte, s string) []byte {
	if utf8.ValidString(s) {
		return append(buf, s...)
	}
	return append(buf, strings.ToValidUTF8(s, "\uFFFD")...)
}

// appendFloatRepr appends Python's repr of f: the shortest digits that read back as f, in
// positional notation for 1e-4 <= |f| < 1e16 (with ".0" when whole), else d.ddde+XX.
func appendFloatRepr(buf []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(buf, "nan"...)
	case math.IsInf(f, 1):
		return append(buf, "inf"...)
	case math.IsInf(f, -1):
		return append(buf, "-inf"...)
	}
	var scratch [32]byte
	e := strconv.AppendFloat(scratch[:0], f, 'e', -1, 64) // [-]d[.ddd]e±XX
	if e[0] == '-' {
		buf = append(buf, '-')
		e = e[1:]
	}
	mark := strings.IndexByte(string(e), 'e')
	mantissa, exponent := e[:mark], e[mark+1:]
	exp, _ := strconv.Atoi(string(exponent))
	var digits [24]byte
	nd := 0
	for _, c := range mantissa {
		if c != '.' {
			digits[nd] = c
			nd++
		}
	}
	d := digits[:nd]
	point := exp + 1 // digits are 0.d1d2... x 10^point
	if point > -4 && point <= 16 {
		switch {
		case point <= 0:
			buf = append(buf, "0."...)
			for i := 0; i < -point; i++ {
				buf = append(buf, '0')
			}
			return append(buf, d...)
		case point >= nd:
			buf = append(buf, d...)
			for i := nd; i < point; i++ {
				buf = append(buf, '0')
			}
			return append(buf, ".0"...)
		default:
			buf = append(buf, d[:point]...)
			buf = append(buf, '.')
			return append(buf, d[point:]...)
		}
	}
	buf = append(buf, d[0])
	if nd > 1 {
		buf = append(buf, '.')
		buf = append(buf, d[1:]...)
	}
	buf = append(buf, 'e')
	if exp < 0 {
		buf = append(buf, '-')
		exp = -exp
	} else {
		buf = append(buf, '+')
	}
	if exp < 10 {
		buf = append(buf, '0')
	}
	return strconv.AppendInt(buf, int64(exp), 10)
}

// appendJSONSlice appends json.dumps(list(values), separators=(",", ":")).
func appendJSONSlice(buf []byte, values pcommon.Slice) []byte {
	buf = append(buf, '[')
	for i := 0; i < values.Len(); i++ {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONValue(buf, values.At(i))
	}
	return append(buf, ']')
}

func appendJSONValue(buf []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendJSONString(buf, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(buf, v.Int(), 10)
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return append(buf, "true"...)
		}
		return append(buf, "false"...)
	case pcommon.ValueTypeDouble:
		f := v.Double()
		switch {
		case math.IsNaN(f):
			return append(buf, "NaN"...)
		case math.IsInf(f, 1):
			return append(buf, "Infinity"...)
		case math.IsInf(f, -1):
			return append(buf, "-Infinity"...)
		}
		return appendFloatRepr(buf, f)
	case pcommon.ValueTypeBytes:
		return appendJSONString(buf, hex.EncodeToString(v.Bytes().AsRaw()))
	case pcommon.ValueTypeSlice:
		return appendJSONSlice(buf, v.Slice())
	case pcommon.ValueTypeMap:
		buf = append(buf, '{')
		first := true
		for _, kv := range entries(v.Map()) {
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendJSONString(buf, kv.key)
			buf = append(buf, ':')
			buf = appendJSONValue(buf, kv.value)
		}
		return append(buf, '}')
	}
	return append(buf, "null"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as Python's json.dumps writes it (ensure_ascii: every character
// outside ' '..'~' escaped, astral ones as surrogate pairs).
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for _, r := range s {
		switch r {
		case '"':
			buf = append(buf, '\\', '"')
		case '\\':
			buf = append(buf, '\\', '\\')
		case '\n':
			buf = append(buf, '\\', 'n')
		case '\r':
			buf = append(buf, '\\', 'r')
		case '\t':
			buf = append(buf, '\\', 't')
		case '\b':
			buf = append(buf, '\\', 'b')
		case '\f':
			buf = append(buf, '\\', 'f')
		default:
			if r >= ' ' && r <= '~' {
				buf = append(buf, byte(r))
				continue
			}
			if r > 0xFFFF {
				r -= 0x10000
				buf = appendU(buf, 0xD800|((r>>10)&0x3FF))
				buf = appendU(buf, 0xDC00|(r&0x3FF))
				continue
			}
			buf = appendU(buf, r)
		}
	}
	return append(buf, '"')
}

func appendU(buf []byte, r rune) []byte {
	return append(buf, '\\', 'u', hexDigits[(r>>12)&15], hexDigits[(r>>8)&15],
		hexDigits[(r>>4)&15], hexDigits[r&15])
}

// appendReprMap appends Python's str() of the dict a kvlist becomes: {'k': v, ...}.
func appendReprMap(buf []byte, m pcommon.Map) []byte {
	buf = append(buf, '{')
	for i, kv := range entries(m) {
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = appendReprString(buf, kv.key)
		buf = append(buf, ": "...)
		buf = appendRepr(buf, kv.value)
	}
	return append(buf, '}')
}

func appendRepr(buf []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendReprString(buf, v.Str())
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return append(buf, "True"...)
		}
		return append(buf, "False"...)
	case pcommon.ValueTypeBytes:
		return appendReprBytes(buf, v.Bytes().AsRaw())
	case pcommon.ValueTypeSlice: // a tuple
		s := v.Slice()
		buf = append(buf, '(')
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				buf = append(buf, ", "...)
			}
			buf = appendRepr(buf, s.At(i))
		}
		if s.Len() == 1 {
			buf = append(buf, ',')
		}
		return append(buf, ')')
	case pcommon.ValueTypeMap:
		return appendReprMap(buf, v.Map())
	}
	return renderValue(buf, v) // int, float, None read the same
}

// appendReprString appends Python's repr of a str.
func appendReprString(buf []byte, s string) []byte {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	buf = append(buf, quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			buf = append(buf, '\\', byte(r))
		case r == '\n':
			buf = append(buf, '\\', 'n')
		case r == '\r':
			buf = append(buf, '\\', 'r')
		case r == '\t':
			buf = append(buf, '\\', 't')
		case r < ' ' || r == 0x7f:
			buf = append(buf, '\\', 'x', hexDigits[r>>4], hexDigits[r&15])
		case r < 0x80 || unicode.IsPrint(r):
			buf = utf8.AppendRune(buf, r)
		case r <= 0xFF:
			buf = append(buf, '\\', 'x', hexDigits[r>>4], hexDigits[r&15])
		case r <= 0xFFFF:
			buf = append(buf, '\\', 'u', hexDigits[(r>>12)&15], hexDigits[(r>>8)&15],
				hexDigits[(r>>4)&15], hexDigits[r&15])
		default:
			buf = append(buf, '\\', 'U')
			for shift := 28; shift >= 0; shift -= 4 {
				buf = append(buf, hexDigits[(r>>uint(shift))&15])
			}
		}
	}
	return append(buf, quote)
}

func appendReprBytes(buf []byte, b []byte) []byte {
	quote := byte('\'')
	if strings.IndexByte(string(b), '\'') >= 0 && strings.IndexByte(string(b), '"') < 0 {
		quote = '"'
	}
	buf = append(buf, 'b', quote)
	for _, c := range b {
		switch {
		case c == quote || c == '\\':
			buf = append(buf, '\\', c)
		case c == '\n':
			buf = append(buf, '\\', 'n')
		case c == '\r':
			buf = append(buf, '\\', 'r')
		case c == '\t':
			buf = append(buf, '\\', 't')
		case c < ' ' || c >= 0x7f:
			buf = append(buf, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
		default:
			buf = append(buf, c)
		}
	}
	return append(buf, quote)
}

// keyValue is one attribute after duplicates are folded.
type keyValue struct {
	key   string
	value pcommon.Value
}

// entries lists m as a Python dict built from it would hold it: a key sent twice (OTLP
// forbids it, pdata keeps it) keeps its first place and its last value.
func entries(m pcommon.Map) []keyValue {
	out := make([]keyValue, 0, m.Len())
	return appendEntries(out, m)
}

func appendEntries(out []keyValue, m pcommon.Map) []keyValue {
	start := len(out)
	for k, v := range m.All() {
		if !utf8.ValidString(k) { // as stored (see appendText): keys equal once stored fold here
			k = strings.ToValidUTF8(k, "\uFFFD")
		}
		dup := -1
		for i := start; i < len(out); i++ {
			if out[i].key == k {
				dup = i
				break
			}
		}
		if dup >= 0 {
			out[dup].value = v
			continue
		}
		out = append(out, keyValue{k, v})
	}
	return out
}
