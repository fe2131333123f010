package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// checkGaps judges the gaps from CLOCK_MONOTONIC read around each write;
// the trace_pipe_raw pages a scenario reads carry the ring buffer's own
// time stamps and its time extends. checkPages holds the two together for
// every two successive records of a CPU the pages show: the ring buffer's
// gap must lie within the one CLOCK_MONOTONIC brackets (the kernel reads
// its clock inside the write(2)), a time extend must stand only where the
// scenario plans one, and one must stand wherever it plans one, except
// before the first event of a page, whose time is the page's. After
// checkGaps passed, none of this depends on how loaded the machine was:
// a disagreement says that the gap check's model of the kernel (its
// clock, which writes it records) is wrong, or that the kernel changed.

// Fields of the ring buffer's pages (include/linux/ring_buffer.h); the
// event types and pageHeader are in golden_test.go's terms, repeated here
// because the capture runs without the test.
const (
	rawPageSize     = 4096
	rawPageHeader   = 16
	rawCommitMask   = 0x3fffffff
	rawMissedEvents = 1 << 31
	rawPadding      = 29
	rawTimeExtend   = 30
	rawTimeStamp    = 31
	rawEntrySize    = 8 // struct trace_entry
	tsShift         = 27
)

// pageRecord is a record read from trace_pipe_raw pages.
type pageRecord struct {
	ts     uint64 // the ring buffer's time stamp
	extend bool   // a time extend stands right before it
	first  bool   // no event before it in its page
	lost   bool   // first in a page that says records were lost before it
	absTS  bool   // after an absolute time stamp: ts is not comparable
	body   []byte // the payload and the up to 4 bytes that round it up
}

// parsePages decodes the base64 pages of a "raw" step into their records,
// in order.
func parsePages(pages []string) ([]pageRecord, error) {
	var out []pageRecord
	for pi, p := range pages {
		b, err := base64.StdEncoding.DecodeString(p)
		if err != nil {
			return nil, fmt.Errorf("page %d: %w", pi, err)
		}
		pg := make([]byte, max(len(b), rawPageHeader))
		copy(pg, b)
		ts := binary.LittleEndian.Uint64(pg)
		commit := binary.LittleEndian.Uint64(pg[8:])
		d := pg[rawPageHeader:]
		size := int(commit & rawCommitMask)
		if size > rawPageSize-rawPageHeader {
			return nil, fmt.Errorf("page %d: commit %d past the page's end", pi, size)
		}
		if size > len(d) {
			// Trailing zeros were cut: put them back.
			d = append(d, make([]byte, size-len(d))...)
		}
		d = d[:size]
		lost := commit&rawMissedEvents != 0
		first, extend, abs := true, false, false
		for pos := 0; pos+4 <= size; {
			w := binary.LittleEndian.Uint32(d[pos:])
			typeLen, delta := w&31, uint64(w>>5)
			var rec []byte
			switch {
			case typeLen == rawPadding && delta == 0:
				pos = size
				continue
			case typeLen == rawPadding:
				if pos+8 > size {
					return nil, fmt.Errorf("page %d: padding at %d past the commit %d", pi, pos, size)
				}
				pos += 4 + int(binary.LittleEndian.Uint32(d[pos+4:]))
				continue
			case typeLen == rawTimeExtend || typeLen == rawTimeStamp:
				if pos+8 > size {
					return nil, fmt.Errorf("page %d: time event at %d past the commit %d", pi, pos, size)
				}
				v := uint64(binary.LittleEndian.Uint32(d[pos+4:]))<<tsShift | delta
				if typeLen == rawTimeExtend {
					ts += v
					extend = true
				} else {
					abs = true
				}
				first = false
				pos += 8
				continue
			case typeLen == 0:
				if pos+8 > size {
					return nil, fmt.Errorf("page %d: record at %d past the commit %d", pi, pos, size)
				}
				a := int(binary.LittleEndian.Uint32(d[pos+4:]))
				if a < 4 || pos+4+a > size {
					return nil, fmt.Errorf("page %d: record at %d of length %d past the commit %d", pi, pos, a, size)
				}
				rec = d[pos+8 : pos+4+a]
				pos += 4 + a
			default:
				n := int(typeLen) * 4
				if pos+4+n > size {
					return nil, fmt.Errorf("page %d: record at %d of length %d past the commit %d", pi, pos, n, size)
				}
				rec = d[pos+4 : pos+4+n]
				pos += 4 + n
			}
			ts += delta
			r := pageRecord{ts: ts, extend: extend, first: first, lost: lost && first, absTS: abs}
			if len(rec) >= rawEntrySize {
				r.body = rec[rawEntrySize:]
			}
			out = append(out, r)
			first, extend = false, false
		}
	}
	return out, nil
}

// writePayload is the payload write wi of step s sent.
func writePayload(s *step, wi int) []byte {
	if s.Op == "write_hex" {
		p, _ := hex.DecodeString(s.Hex)
		return p
	}
	return payload(s.Size, s.Seq+uint32(wi))
}

// pagesDisagree starts each line of stderr that gives one of checkPages'
// disagreements; TestGoldenMatchesKernel fails on it.
const pagesDisagree = "capture: the pages disagree with the gap check:"

// checkPages compares the pages of sc's "raw" steps with its records, as
// the comment above says, and returns the disagreements and what it
// compared. enabled is which
// events were enabled when sc started.
func checkPages(sc *scenario, enabled map[string]bool) (bad []string, st pageStats, err error) {
	var out []string
	for si, s := range sc.Steps {
		if s.Op != "raw" || len(s.Pages) == 0 {
			continue
		}
		recs, err := records(sc, enabled, si)
		if err != nil {
			return nil, st, err
		}
		// The CPU's records by payload; nil where two share one.
		byPayload := map[string]*record{}
		for _, r := range recs {
			if r.cpu != *s.CPU {
				continue
			}
			k := string(writePayload(sc.Steps[r.step], r.write))
			if _, dup := byPayload[k]; dup {
				byPayload[k] = nil
			} else {
				byPayload[k] = r
			}
		}
		match := func(body []byte) *record {
			var found *record
			for stale := 0; stale <= min(4, len(body)); stale++ {
				r := byPayload[string(body[:len(body)-stale])]
				if r == nil {
					continue
				}
				if found != nil && found != r {
					return nil
				}
				found = r
			}
			return found
		}
		prs, err := parsePages(s.Pages)
		if err != nil {
			// The kernel's answer, not the capture's fault: let the
			// golden comparison show it.
			out = append(out, fmt.Sprintf("%s: step %d (CPU %d): %v", sc.Name, si, *s.CPU, err))
			continue
		}
		name := func(r *record) string { return fmt.Sprintf("step %d write %d", r.step, r.write) }
		var prevPR *pageRecord
		var prev *record
		for i := range prs {
			pr := &prs[i]
			r := match(pr.body)
			p, ppr := prev, prevPR
			prev, prevPR = r, pr
			if r == nil || p == nil || pr.lost || pr.absTS || ppr.absTS {
				continue
			}
			where := fmt.Sprintf("%s: step %d (CPU %d): the record of %s", sc.Name, si, *s.CPU, name(r))
			if r.prev != p {
				want := "none"
				if r.prev != nil {
					want = name(r.prev)
				}
				out = append(out, fmt.Sprintf("%s follows that of %s in the pages, but the steps have it follow %s", where, name(p), want))
				continue
			}
			st.pairs++
			if pr.extend {
				st.extends++
			}
			gap := int64(pr.ts - ppr.ts)
			lo, hi := r.at[0]-p.at[1], r.at[1]-p.at[0]
			if gap < lo-gapMargin || gap > hi+gapMargin {
				out = append(out, fmt.Sprintf("%s is %.3f ms after the one before it by the ring buffer's clock, but %.3f to %.3f ms by CLOCK_MONOTONIC",
					where, float64(gap)/1e6, float64(lo)/1e6, float64(hi)/1e6))
			}
			switch {
			case pr.extend && !r.plannedLong():
				out = append(out, fmt.Sprintf("%s has a time extend before it, %.3f ms after the one before, where the scenario plans none (%d ms of sleep)",
					where, float64(gap)/1e6, r.planned))
			case !pr.extend && r.plannedLong() && !pr.first:
				out = append(out, fmt.Sprintf("%s has no time extend before it, %.3f ms after the one before, where the scenario plans one (%d ms of sleep)",
					where, float64(gap)/1e6, r.planned))
			}
		}
	}
	return out, st, nil
}

// pageStats counts what checkPages compared: pairs of successive records,
// and time extends before the second of a pair.
type pageStats struct{ pairs, extends int }
