package report_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/uetrace/uetrace/internal/report"
)

// perfCollect is a file of Microsoft's perf-collect (LinuxTracepoints 1.4),
// whose attrs sit in slots larger than their own size says; perfCollectDecode
// is what Microsoft's perf-decode prints of it (perfdata/testdata/README.md).
const (
	perfCollect       = "../../perfdata/testdata/perf-collect.data"
	perfCollectDecode = "../../perfdata/testdata/perf-collect.decode.json"
)

// TestPerfCollectFile reports perf-collect's file as JSON and finds in it
// every event perf-decode shows, in order, with the same name, task, CPU,
// fields and EventHeader level and keyword.
func TestPerfCollectFile(t *testing.T) {
	var decoded map[string][]map[string]any
	if err := json.Unmarshal(readFile(t, perfCollectDecode), &decoded); err != nil {
		t.Fatal(err)
	}
	want := decoded["perf-collect.data"]
	out, sum := run(t, perfCollect, report.JSON)
	if sum.Samples != uint64(len(want)) || sum.Undecoded != 0 {
		t.Errorf("summary %+v, want %d samples, all decoded", sum, len(want))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	i := 0
	for ; sc.Scan(); i++ {
		var got map[string]any
		if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
			t.Fatalf("line %d: %v\n%s", i+1, err, sc.Bytes())
		}
		if i >= len(want) {
			t.Fatalf("line %d is more than perf-decode's %d events: %s", i+1, len(want), sc.Bytes())
		}
		w := want[i]
		meta := w["meta"].(map[string]any)
		name, _ := got["event"].(string)
		if name == "" {
			name = got["system"].(string) + ":" + got["name"].(string)
		}
		if name != w["n"] || got["pid"] != meta["pid"] || got["tid"] != meta["tid"] || got["cpu"] != meta["cpu"] {
			t.Errorf("event %d: %s pid %v tid %v cpu %v, perf-decode: %s pid %v tid %v cpu %v",
				i, name, got["pid"], got["tid"], got["cpu"], w["n"], meta["pid"], meta["tid"], meta["cpu"])
		}
		fields := make(map[string]any)
		for k, v := range w {
			if k != "n" && k != "meta" {
				fields[k] = v
			}
		}
		if diff := cmp.Diff(fields, got["fields"]); diff != "" {
			t.Errorf("event %d (%s): fields differ from perf-decode's (-perf-decode +report):\n%s", i, name, diff)
		}
		if lvl, ok := meta["level"]; ok {
			gm, _ := got["meta"].(map[string]any)
			if gm["level"] != lvl || gm["keyword"] != meta["keyword"] {
				t.Errorf("event %d (%s): meta %v, perf-decode's level %v keyword %v", i, name, gm, lvl, meta["keyword"])
			}
		}
	}
	if i != len(want) {
		t.Errorf("%d events, perf-decode shows %d", i, len(want))
	}
}
