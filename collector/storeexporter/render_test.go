package storeexporter

import (
	"bytes"
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The expected strings are what otel_llm's attribute_string prints for the same Python values.

func TestFloatsRenderAsPythonsRepr(t *testing.T) {
	cases := map[float64]string{
		1.0: "1.0", 0.1: "0.1", 1e16: "1e+16", 1e15: "1000000000000000.0", 1e-5: "1e-05",
		0.0001: "0.0001", 1.5e300: "1.5e+300", 123456789.123: "123456789.123", -2.5e-7: "-2.5e-07",
		5e-324: "5e-324", 1.7976931348623157e308: "1.7976931348623157e+308",
		12345678901234567.0: "1.2345678901234568e+16", 0.30000000000000004: "0.30000000000000004",
		math.Inf(1): "inf", math.Inf(-1): "-inf", 42: "42.0", 100: "100.0",
	}
	for value, want := range cases {
		if got := string(appendFloatRepr(nil, value)); got != want {
			t.Errorf("repr(%v): got %q, want %q", value, got, want)
		}
	}
	if got := string(appendFloatRepr(nil, math.Copysign(0, -1))); got != "-0.0" {
		t.Errorf("repr(-0.0): got %q", got)
	}
	if got := string(appendFloatRepr(nil, math.NaN())); got != "nan" {
		t.Errorf("repr(nan): got %q", got)
	}
}

func TestArraysRenderAsPythonsCompactJSON(t *testing.T) {
	strs := pcommon.NewValueSlice()
	for _, s := range []string{"a", "é", "\U0001F600", "\"\\\n\x7f"} {
		strs.Slice().AppendEmpty().SetStr(s)
	}
	if got, want := string(renderValue(nil, strs)), `["a","\u00e9","\ud83d\ude00","\"\\\n\u007f"]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	mixed := pcommon.NewValueSlice()
	mixed.Slice().AppendEmpty().SetDouble(1.5)
	mixed.Slice().AppendEmpty().SetDouble(math.NaN())
	mixed.Slice().AppendEmpty().SetDouble(math.Inf(-1))
	mixed.Slice().AppendEmpty().SetBool(true)
	mixed.Slice().AppendEmpty()
	if got, want := string(renderValue(nil, mixed)), `[1.5,NaN,-Infinity,true,null]`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestScalarsAndKvlistsRenderAsPythonDoes(t *testing.T) {
	kv := pcommon.NewValueMap()
	kv.Map().PutInt("a", 1)
	kv.Map().PutEmptySlice("b").AppendEmpty().SetStr("it's")
	kv.Map().PutEmptyBytes("c").FromRaw([]byte{0, 'a'})
	cases := []struct {
		value pcommon.Value
		want  string
	}{
		{pcommon.NewValueStr("text"), "text"},
		{pcommon.NewValueInt(-7), "-7"},
		{pcommon.NewValueBool(true), "true"},
		{pcommon.NewValueBool(false), "false"},
		{pcommon.NewValueEmpty(), "None"},
		{kv, `{'a': 1, 'b': ("it's",), 'c': b'\x00a'}`},
	}
	raw := pcommon.NewValueBytes()
	raw.Bytes().FromRaw([]byte{0xde, 0xad})
	cases = append(cases, struct {
		value pcommon.Value
		want  string
	}{raw, "dead"})
	for _, c := range cases {
		if got := string(renderValue(nil, c.value)); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

func TestAKeySentTwiceKeepsItsFirstPlaceAndLastValue(t *testing.T) {
	got := entries(attributesWithDuplicate(t))
	if len(got) != 2 || got[0].key != "a" || got[0].value.Str() != "3" || got[1].key != "b" {
		t.Fatalf("got %v", got)
	}
}

// attributesWithDuplicate decodes a request whose span has a, b, a (a key sent twice, which
// OTLP forbids and pdata keeps).
func attributesWithDuplicate(t *testing.T) pcommon.Map {
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.Attributes().PutStr("a", "1")
	span.Attributes().PutStr("b", "2")
	span.Attributes().PutStr("z", "3")
	data, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte("\x0a\x01z"), []byte("\x0a\x01a"), 1)
	back, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
	if err != nil {
		t.Fatal(err)
	}
	m := back.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
	if m.Len() != 3 {
		t.Fatalf("the duplicate did not survive decoding: %d keys", m.Len())
	}
	return m
}
