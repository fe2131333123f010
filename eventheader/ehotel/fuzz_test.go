package ehotel_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/internal/testutil"
)

// FuzzRecord writes records of arbitrary keys, strings, numbers, times and
// severities: each is either refused with an error or written as an event
// that eventheader.Decode reads whole, its body and attribute intact (the
// SDK drops an attribute with an empty key).
func FuzzRecord(f *testing.F) {
	f.Add("body", "key", "value", int64(1), 1.5, "name", "INFO", int8(9), int64(1_704_112_496_789_000_000))
	f.Add("", "event_id", "", int64(-1), math.NaN(), " ", "", int8(0), int64(0))
	f.Add("\x00\xff", "k\x00", "héllo\n", int64(math.MinInt64), math.Inf(-1), "\t", "x", int8(24), int64(math.MinInt64))
	f.Add(strings.Repeat("b", 70000), "PartB", "{}", int64(7), 0.0, "n", "s", int8(25), int64(math.MaxInt64))
	f.Add(strings.Repeat("b", 9000), "PartC", "[1]", int64(7), 0.0, "n", "\x80", int8(19), int64(math.MaxInt64))
	e := newEnv(f)
	p := newProcessor(f, e, "FuzzProv")
	ss := e.attach(f, "user_events:FuzzProv_*")
	for _, s := range []log.Severity{log.SeverityTrace, log.SeverityInfo, log.SeverityWarn, log.SeverityError, log.SeverityFatal} {
		testutil.Wait(f, "the tracepoint to be enabled", p.Exporter().Tracepoint(s).Enabled)
	}
	f.Fuzz(func(t *testing.T, body, key, sval string, ival int64, fval float64, name, sevText string, sev int8, ns int64) {
		var lr log.Record
		lr.SetTimestamp(time.Unix(0, ns))
		lr.SetSeverity(log.Severity(sev))
		lr.SetSeverityText(sevText)
		lr.SetEventName(name)
		lr.SetBody(attribute.StringValue(body))
		lr.AddAttributes(attribute.String(key, sval), attribute.Int64(key+"_i", ival), attribute.Float64(key+"_f", fval))
		r := sdkRecord(t, context.Background(), lr)
		tooLarge := ss.TooLarge()
		if err := p.OnEmit(context.Background(), &r); err != nil {
			return // refused: nothing written
		}
		if ss.TooLarge() != tooLarge {
			return // over perf's 8 KiB: the session dropped it, as perf does
		}
		g := readBack(t, ss, 1)[0]
		ev, err := eventheader.Decode(g.tracepoint, g.raw)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		var gotBody, gotS string
		depth, part := 0, ""
		fields := ev.Fields()
		for fields.Next() {
			it := fields.Item()
			switch it.Kind {
			case eventheader.ItemStructBegin:
				if it.Depth == 0 {
					part = string(it.FieldName())
				}
				depth++
			case eventheader.ItemStructEnd:
				depth--
			case eventheader.ItemValue:
				if part == "PartB" && string(it.FieldName()) == "body" {
					gotBody = string(it.Value)
				}
				if part == "PartC" && string(it.Name) == strings.NewReplacer(";", "_", "\x00", "_").Replace(key) {
					gotS = string(it.Value)
				}
			}
		}
		if err := fields.Err(); err != nil {
			t.Fatalf("fields: %v", err)
		}
		if _, err := ev.AppendJSON(nil); err != nil {
			t.Fatalf("JSON: %v", err)
		}
		if body != "" && gotBody != body {
			t.Errorf("body %q, read %q", body, gotBody)
		}
		if key != "" && key != "event_id" && gotS != sval && !strings.HasSuffix(key, "_i") && !strings.HasSuffix(key, "_f") {
			t.Errorf("attribute %q = %q, read %q", key, sval, gotS)
		}
	})
}
