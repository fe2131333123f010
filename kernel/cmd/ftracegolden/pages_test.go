package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/uetrace/uetrace/internal/subsys/ftrace"
)

// replayRing makes the pages of sc's "raw" steps with package ftrace's
// model of the ring buffer (which TestGoldenMatchesKernel holds against the
// kernel): after simulate, each record goes into the Ring at the middle of
// its write(2)'s CLOCK_MONOTONIC bracket, plus skew[[2]int{step, write}]
// ns, as the kernel's clock would read it.
func replayRing(t *testing.T, sc *scenario, skew map[[2]int]int64) {
	t.Helper()
	recs, err := records(sc, initialEnabled(), -1)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[[2]int]bool{}
	for _, r := range recs {
		recorded[[2]int{r.step, r.write}] = true
	}
	ring := ftrace.New(ftrace.Config{NCPU: 2, BufferKB: ftrace.DefaultBufferKB})
	for si, s := range sc.Steps {
		switch s.Op {
		case "trunc":
			ring.Reset()
		case "write", "write_hex":
			for wi, at := range s.at {
				if !recorded[[2]int{si, wi}] {
					continue
				}
				rec := make([]byte, rawEntrySize)
				binary.LittleEndian.PutUint32(rec[4:], 42) // common_pid
				rec = append(rec, writePayload(s, wi)...)
				ts := (at[0]+at[1])/2 + skew[[2]int{si, wi}]
				ring.Write(&ftrace.Entry{TS: uint64(ts), CPU: *s.CPU, Record: rec})
			}
		case "raw":
			for {
				pg, ok := ring.ReadRawPage(nil, *s.CPU)
				if !ok {
					break
				}
				s.Pages = append(s.Pages, base64.StdEncoding.EncodeToString(bytes.TrimRight(pg, "\x00")))
			}
		}
	}
}

// The pages of a run that kept its plan agree with it: the time extends
// stand where the sleeps are (five in lines, one in edge: the others'
// records start a page), and the ring buffer's gaps lie in the brackets.
func TestCheckPagesAgree(t *testing.T) {
	for _, c := range []struct {
		name           string
		pairs, extends int
	}{
		{"lines", 13, 5}, // 8 records on CPU 0, 7 on CPU 1
		{"edge", 8, 1},   // 9 records: the one of 4065 bytes is dropped
	} {
		sc := scenarioNamed(t, c.name)
		simulate(sc, nil, nil, nil)
		replayRing(t, sc, nil)
		if err := checkGaps(sc, initialEnabled()); err != nil {
			t.Fatalf("%s: checkGaps: %v", c.name, err)
		}
		bad, st, err := checkPages(sc, initialEnabled())
		if err != nil || len(bad) != 0 {
			t.Fatalf("%s: checkPages: %v %q", c.name, err, bad)
		}
		if st != (pageStats{c.pairs, c.extends}) {
			t.Errorf("%s: checkPages compared %+v, want %d pairs, %d with a time extend", c.name, st, c.pairs, c.extends)
		}
	}
}

func TestCheckPagesDisagree(t *testing.T) {
	for _, c := range []struct {
		name  string
		sc    string
		stall map[[2]int]int64 // as simulate's
		short map[int]int64
		skew  map[[2]int]int64 // as replayRing's
		want  []string         // a substring of each disagreement, in order
	}{
		{
			// A stall that checkGaps would have sent back: the pages
			// show the time extends it made, on CPU 0 and, as the
			// stall delays the next write too, on CPU 1.
			name:  "stall between back-to-back writes",
			sc:    "lines",
			stall: map[[2]int]int64{{6, 0}: 140e6},
			want: []string{
				"lines: step 22 (CPU 0): the record of step 6 write 0 has a time extend before it, 145.100 ms after",
				"lines: step 23 (CPU 1): the record of step 7 write 0 has a time extend before it, 145.100 ms after",
			},
		},
		{
			name:  "a planned sleep that came short",
			sc:    "lines",
			short: map[int]int64{8: 100e6},
			want:  []string{"the record of step 9 write 0 has no time extend before it, 10"},
		},
		{
			// The kernel's clock, not CLOCK_MONOTONIC, ran 2 ms ahead
			// for one record: the gaps before and after it are off.
			name: "clocks apart",
			sc:   "edge",
			skew: map[[2]int]int64{{2, 0}: 2e6},
			want: []string{
				"edge: step 17 (CPU 0): the record of step 2 write 0 is 3.050 ms after the one before it by the ring buffer's clock, but 1.000 to 1.100 ms by CLOCK_MONOTONIC",
				"edge: step 17 (CPU 0): the record of step 3 write 0 is -0.950 ms after",
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := scenarioNamed(t, c.sc)
			simulate(sc, c.stall, nil, c.short)
			replayRing(t, sc, c.skew)
			bad, _, err := checkPages(sc, initialEnabled())
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) != len(c.want) {
				t.Fatalf("checkPages: %q, want %d disagreements", bad, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(bad[i], w) {
					t.Errorf("disagreement %d: %q, want it to contain %q", i, bad[i], w)
				}
			}
			t.Log(strings.Join(bad, "\n"))
		})
	}
}

// A page that says records were lost before it (the commit's flag) breaks
// the pairs: its first record follows nothing the pages show. A record
// past the commit is an error.
func TestParsePagesLost(t *testing.T) {
	pg := make([]byte, 16+12)
	binary.LittleEndian.PutUint64(pg, 1000)
	binary.LittleEndian.PutUint64(pg[8:], 12|rawMissedEvents)
	binary.LittleEndian.PutUint32(pg[16:], 2|7<<5) // 8 bytes, delta 7
	prs, err := parsePages([]string{base64.StdEncoding.EncodeToString(pg)})
	if err != nil {
		t.Fatal(err)
	}
	if len(prs) != 1 || !prs[0].lost || !prs[0].first || prs[0].ts != 1007 || len(prs[0].body) != 0 {
		t.Fatalf("parsePages: %+v", prs)
	}
	// A commit that ends inside the record.
	binary.LittleEndian.PutUint64(pg[8:], 6)
	if _, err := parsePages([]string{base64.StdEncoding.EncodeToString(pg)}); err == nil {
		t.Fatal("parsePages: no error for a record past the commit")
	}
}

// FuzzParsePages: parsePages reads whatever the kernel put in a page
// without panicking, and every record it returns lies inside the page.
func FuzzParsePages(f *testing.F) {
	var g golden
	if js, err := os.ReadFile(goldenFile); err == nil && decode(js, &g) == nil {
		for _, sc := range g.Scenarios {
			for _, s := range sc.Steps {
				for _, p := range s.Pages {
					if b, err := base64.StdEncoding.DecodeString(p); err == nil {
						f.Add(b)
					}
				}
			}
		}
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		prs, err := parsePages([]string{base64.StdEncoding.EncodeToString(b)})
		if err != nil {
			return
		}
		for _, pr := range prs {
			if len(pr.body) > ftrace.PageSize {
				t.Fatalf("a record of %d bytes in a page", len(pr.body))
			}
		}
	})
}
