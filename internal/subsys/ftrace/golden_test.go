package ftrace

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// The golden file written by kernel/cmd/ftracegolden (see its package comment).
type golden struct {
	Kernel       string      `json:"kernel"`
	NCPU         int         `json:"ncpu"`
	Comm         string      `json:"comm"`
	BootSizeKB   string      `json:"boot_buffer_size_kb"`
	EnableSizeKB string      `json:"enabled_buffer_size_kb"`
	Events       []gEvent    `json:"events"`
	Scenarios    []*scenario `json:"scenarios"`
}

type gEvent struct {
	Cmd  string `json:"cmd"`
	Name string `json:"name"`
	ID   int    `json:"id"`
}

type scenario struct {
	Name  string  `json:"name"`
	Doc   string  `json:"doc"`
	Steps []*step `json:"steps"`
}

type step struct {
	Op     string   `json:"op"`
	Event  string   `json:"event"`
	CPU    *int     `json:"cpu"`
	Size   int      `json:"size"`
	Seq    uint32   `json:"seq"`
	Count  int      `json:"count"`
	Hex    string   `json:"hex"`
	TID    int      `json:"tid"`
	Mono   []int64  `json:"mono"`
	N      []int    `json:"n"`
	Errno  string   `json:"errno"`
	Arg    string   `json:"arg"`
	MS     int      `json:"ms"`
	Text   string   `json:"text"`
	TextB  string   `json:"text_b64"`
	Chunks []int    `json:"chunks"`
	Pages  []string `json:"pages"`
	Err    string   `json:"err"`
}

func (s *step) text(t *testing.T) string {
	if s.TextB == "" {
		return s.Text
	}
	b, err := base64.StdEncoding.DecodeString(s.TextB)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func loadGolden(t testing.TB) *golden {
	b, err := os.ReadFile("testdata/kernel-ftrace.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// payload is the capture's payload generator.
func payload(size int, seq uint32) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(seq + uint32(i))
	}
	if size >= 4 {
		binary.NativeEndian.PutUint32(b, seq)
	}
	return b
}

// gWrite is one write(2) of the capture.
type gWrite struct {
	sc, step  int
	cpu, tid  int
	event     string
	typ       uint16
	flags     [2]byte // common_flags and common_preempt_count, from what the kernel showed
	payload   []byte
	n         int // what the write returned (-1: error)
	mono      int64
	body      string // the event part of its trace line
	ts        uint64
	tsQuality int // 0 unknown, 1 microseconds from text, 2 exact from trace_pipe_raw
}

func (w *gWrite) record() []byte {
	rec := make([]byte, 8, 8+len(w.payload))
	binary.NativeEndian.PutUint16(rec, w.typ)
	rec[2], rec[3] = w.flags[0], w.flags[1]
	binary.NativeEndian.PutUint32(rec[4:], uint32(w.tid))
	return append(rec, w.payload...)
}

// registry follows the events the capture registers, as far as the
// replay needs: each event's definition and type id, and the rule that
// deleting an event that was ever enabled makes the next delete through
// dynamic_events clear the buffer.
type registry struct {
	byName  map[string]*regEvent
	byID    map[uint16]*regEvent
	pending bool // tr->clear_trace
}

type regEvent struct {
	name    string
	ev      *eventdef.Event
	id      uint16
	enabled bool // ever enabled
	persist bool // created through dynamic_events
	fdRef   bool // registered on the capture's current fd
}

func (g *registry) add(t testing.TB, cmd string, id int) *regEvent {
	ev, err := eventdef.Parse(cmd)
	if err != nil {
		t.Fatalf("parse %q: %v", cmd, err)
	}
	if old := g.byName[ev.Name]; old != nil {
		if id >= 0 && uint16(id) != old.id {
			if g.byID[old.id] == old {
				delete(g.byID, old.id)
			}
			old.id = uint16(id)
			g.byID[old.id] = old
		}
		return old
	}
	e := &regEvent{name: ev.Name, ev: ev, id: uint16(id)}
	g.byName[e.name] = e
	if id >= 0 {
		g.byID[e.id] = e
	}
	return e
}

func (g *registry) remove(e *regEvent) {
	delete(g.byName, e.name)
	if g.byID[e.id] == e {
		delete(g.byID, e.id)
	}
	if e.enabled {
		g.pending = true
	}
}

func (g *registry) lookup(typ uint16) (*eventdef.Event, string, bool) {
	e := g.byID[typ]
	if e == nil {
		return nil, "", false
	}
	return e.ev, e.name, true
}

// collectWrites lists every write of the capture, with each record's type
// id and trace text, in order.
func collectWrites(t *testing.T, g *golden) []*gWrite {
	reg := &registry{byName: map[string]*regEvent{}, byID: map[uint16]*regEvent{}}
	for _, e := range g.Events {
		reg.add(t, e.Cmd, e.ID)
	}
	var ws []*gWrite
	var mono int64
	for si, sc := range g.Scenarios {
		for i, s := range sc.Steps {
			switch s.Op {
			case "reg_only":
				if s.Err == "" {
					id, _ := strconv.Atoi(s.Text)
					reg.add(t, s.Arg, id)
				}
			case "iocsdel":
				if e := reg.byName[s.Arg]; e != nil && s.Err == "" {
					reg.remove(e)
				}
			case "write", "write_hex":
				e := reg.byName[s.Event]
				if e == nil {
					t.Fatalf("%s step %d: unknown event %s", sc.Name, i, s.Event)
				}
				var ps [][]byte
				if s.Op == "write_hex" {
					p, err := hex.DecodeString(s.Hex)
					if err != nil {
						t.Fatal(err)
					}
					ps = append(ps, p)
				} else {
					for k := range s.Count {
						ps = append(ps, payload(s.Size, s.Seq+uint32(k)))
					}
				}
				for k, p := range ps {
					if k == 0 {
						mono = s.Mono[0]
					} else {
						mono += s.Mono[k]
					}
					w := &gWrite{sc: si, step: i, cpu: *s.CPU, tid: s.TID, event: s.Event, typ: e.id, payload: p, n: s.N[k], mono: mono}
					w.body = string(e.ev.AppendTrace(nil, e.name, w.record()))
					ws = append(ws, w)
				}
			}
		}
	}
	return ws
}

var lineRE = regexp.MustCompile(`^(.{16})-(\d+) *\[(\d{3,})\] (.{5}) +(\d+)\.(\d{6}): (.*)$`)

// traceLine is a parsed trace line.
type traceLine struct {
	comm  string
	pid   int
	cpu   int
	flags [2]byte
	us    uint64
	body  string
}

// parseLatFlags inverts AppendLatFlags.
func parseLatFlags(s string) (flags [2]byte) {
	switch s[0] {
	case 'D':
		flags[0] |= FlagIRQsOff | FlagBHOff
	case 'd':
		flags[0] |= FlagIRQsOff
	case 'b':
		flags[0] |= FlagBHOff
	case 'X':
		flags[0] |= FlagIRQsNoSupport
	}
	switch s[1] {
	case 'N':
		flags[0] |= FlagNeedResched | FlagPreemptResched
	case 'n':
		flags[0] |= FlagNeedResched
	case 'p':
		flags[0] |= FlagPreemptResched
	}
	switch s[2] {
	case 'Z':
		flags[0] |= FlagNMI | FlagHardIRQ
	case 'z':
		flags[0] |= FlagNMI
	case 'H':
		flags[0] |= FlagHardIRQ | FlagSoftIRQ
	case 'h':
		flags[0] |= FlagHardIRQ
	case 's':
		flags[0] |= FlagSoftIRQ
	}
	nib := func(c byte) byte {
		if c == '.' {
			return 0
		}
		v, _ := strconv.ParseUint(string(c), 16, 8)
		return byte(v)
	}
	flags[1] = nib(s[3]) | nib(s[4])<<4
	return flags
}

func parseLines(text string) []traceLine {
	var out []traceLine
	for _, l := range strings.Split(text, "\n") {
		m := lineRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[2])
		cpu, _ := strconv.Atoi(m[3])
		s, _ := strconv.ParseUint(m[5], 10, 64)
		u, _ := strconv.ParseUint(m[6], 10, 64)
		out = append(out, traceLine{strings.TrimLeft(m[1], " "), pid, cpu, parseLatFlags(m[4]), s*1000000 + u, m[7]})
	}
	return out
}

// rawEvent is a data event parsed from a trace_pipe_raw page.
type rawEvent struct {
	ts   uint64
	data []byte // rounded up to 4 bytes
}

type rawPage struct {
	ts     uint64
	commit uint64
	lost   uint64 // the count stored after the events, if any
	events []rawEvent
	words  []uint32 // every event header word and length word, in order
	datas  [][]byte // every data event's bytes, in order
}

func parseRawPage(t testing.TB, b []byte) rawPage {
	if len(b) < PageSize {
		b = append(b, make([]byte, PageSize-len(b))...)
	}
	p := rawPage{ts: binary.LittleEndian.Uint64(b), commit: binary.LittleEndian.Uint64(b[8:])}
	size := int(p.commit & 0x3fffffff)
	d := b[PageHeaderSize:]
	ts := p.ts
	pos := 0
	for pos < size {
		w := binary.LittleEndian.Uint32(d[pos:])
		typeLen, delta := w&31, uint64(w>>5)
		p.words = append(p.words, w)
		switch {
		case typeLen == typePadding:
			if delta == 0 {
				pos = size
				continue
			}
			a := binary.LittleEndian.Uint32(d[pos+4:])
			p.words = append(p.words, a)
			pos += int(a) + 4
		case typeLen == typeTimeExtend:
			a := binary.LittleEndian.Uint32(d[pos+4:])
			p.words = append(p.words, a)
			ts += uint64(a)<<tsShift + delta
			pos += 8
		case typeLen == 0:
			a := int(binary.LittleEndian.Uint32(d[pos+4:]))
			p.words = append(p.words, uint32(a))
			ts += delta
			p.events = append(p.events, rawEvent{ts, d[pos+8 : pos+4+a]})
			pos += 4 + a
		case typeLen <= typeLenMax:
			ts += delta
			p.events = append(p.events, rawEvent{ts, d[pos+4 : pos+4+int(typeLen)*4]})
			pos += 4 + int(typeLen)*4
		default:
			t.Fatalf("raw page: event type %d at %d", typeLen, pos)
		}
	}
	for _, e := range p.events {
		p.datas = append(p.datas, e.data)
	}
	if p.commit&rbMissedStored != 0 {
		p.lost = binary.LittleEndian.Uint64(d[size:])
	}
	return p
}

// assignTimes gives every write its kernel time stamp: exact from the raw
// pages, to the microsecond from trace text, and from CLOCK_MONOTONIC
// (shifted by the offset of the nearest write whose time is known) for
// records the capture never saw.
func assignTimes(t *testing.T, g *golden, ws []*gWrite) {
	byStep := map[[2]int][]*gWrite{}
	for _, w := range ws {
		byStep[[2]int{w.sc, w.step}] = append(byStep[[2]int{w.sc, w.step}], w)
	}
	for si, sc := range g.Scenarios {
		var before []*gWrite // the scenario's writes so far
		for i, s := range sc.Steps {
			before = append(before, byStep[[2]int{si, i}]...)
			switch s.Op {
			case "trace", "pipe", "pipe2":
				// Match lines per CPU from the last one backwards: the
				// newest records are the newest writes.
				lines := parseLines(s.text(t))
				cursor := map[int]int{}
				for k := len(lines) - 1; k >= 0; k-- {
					l := lines[k]
					c, ok := cursor[l.cpu]
					if !ok {
						c = len(before)
					}
					for j := c - 1; j >= 0; j-- {
						w := before[j]
						if w.cpu == l.cpu && w.tid == l.pid && w.body == l.body && w.n > 0 {
							cursor[l.cpu] = j
							if w.tsQuality < 1 {
								w.ts, w.tsQuality = l.us*1000, 1
								w.flags = l.flags
							}
							break
						}
					}
				}
			case "raw":
				cursor := len(before)
				for k := len(s.Pages) - 1; k >= 0; k-- {
					b, _ := base64.StdEncoding.DecodeString(s.Pages[k])
					p := parseRawPage(t, b)
					for e := len(p.events) - 1; e >= 0; e-- {
						ev := p.events[e]
						for j := cursor - 1; j >= 0; j-- {
							w := before[j]
							rec := w.record()
							if w.cpu == *s.CPU && len(ev.data) >= len(rec) &&
								bytes.Equal(ev.data[:2], rec[:2]) && bytes.Equal(ev.data[4:len(rec)], rec[4:]) {
								cursor = j
								w.ts, w.tsQuality = ev.ts, 2
								w.flags = [2]byte{ev.data[2], ev.data[3]}
								// A page copied from its middle starts at
								// the time of the record consumed before it.
								if e == 0 && ev.ts != p.ts {
									for q := j - 1; q >= 0; q-- {
										if before[q].cpu == w.cpu {
											before[q].ts, before[q].tsQuality = p.ts, 2
											break
										}
									}
								}
								break
							}
						}
					}
				}
			}
		}
	}
	// The rest from CLOCK_MONOTONIC: the time of the previous write on the
	// same CPU whose time is known plus the monotonic time since, kept
	// below the next known one; so that times never go backwards on a CPU,
	// which would add time extends the kernel did not have.
	for cpu := range g.NCPU {
		var idx []int // this CPU's writes
		for i, w := range ws {
			if w.cpu == cpu {
				idx = append(idx, i)
			}
		}
		known := func(i int) bool { return ws[i].tsQuality > 0 }
		for k, i := range idx {
			w := ws[i]
			if known(i) {
				continue
			}
			prev, next := -1, -1
			for q := k - 1; q >= 0 && prev < 0; q-- {
				if known(idx[q]) {
					prev = idx[q]
				}
			}
			for q := k + 1; q < len(idx) && next < 0; q++ {
				if known(idx[q]) {
					next = idx[q]
				}
			}
			// From the nearer of the two in monotonic time, kept between
			// them.
			switch {
			case prev >= 0 && (next < 0 || w.mono-ws[prev].mono <= ws[next].mono-w.mono):
				w.ts = uint64(int64(ws[prev].ts) + w.mono - ws[prev].mono)
			case next >= 0:
				w.ts = uint64(int64(ws[next].ts) - (ws[next].mono - w.mono))
			default:
				t.Fatalf("no write on CPU %d has a known time", cpu)
			}
			if prev >= 0 {
				w.ts = max(w.ts, ws[prev].ts)
			}
			if next >= 0 {
				w.ts = min(w.ts, ws[next].ts)
			}
		}
		var last uint64
		for _, i := range idx {
			last = max(last, ws[i].ts)
			ws[i].ts = last
		}
	}
}

// fakeClock is the replay's clock, set from the kernel's "now ts".
type fakeClock struct{ ns uint64 }

func (c *fakeClock) now() uint64 { return c.ns }

var (
	nowRE    = regexp.MustCompile(`now ts: +(\d+)\.(\d{6})`)
	oldestRE = regexp.MustCompile(`oldest event ts: +\d+\.\d{6}\n`)
)

// TestKernelGolden replays every scenario the capture ran on Linux 6.12.117
// into one Ring, in order, and compares each observation.
func TestKernelGolden(t *testing.T) {
	g := loadGolden(t)
	if g.NCPU != 2 {
		t.Fatalf("golden has %d CPUs", g.NCPU)
	}
	ws := collectWrites(t, g)
	assignTimes(t, g, ws)
	exact, micro := 0, 0
	for _, w := range ws {
		switch w.tsQuality {
		case 2:
			exact++
		case 1:
			micro++
		}
	}
	t.Logf("%d writes: %d with exact times, %d to the microsecond, %d estimated", len(ws), exact, micro, len(ws)-exact-micro)

	reg := &registry{byName: map[string]*regEvent{}, byID: map[uint16]*regEvent{}}
	for _, e := range g.Events {
		re := reg.add(t, e.Cmd, e.ID)
		re.enabled, re.fdRef = true, true
	}
	clock := &fakeClock{}
	r := New(Config{NCPU: g.NCPU, Clock: clock.now, Lookup: reg.lookup})
	if got := string(r.AppendBufferSizeKB(nil, -1)); got != g.BootSizeKB {
		t.Errorf("boot buffer_size_kb = %q, kernel %q", got, g.BootSizeKB)
	}
	if err := r.Expand(); err != nil {
		t.Fatal(err)
	}
	if got := string(r.AppendBufferSizeKB(nil, -1)); got != g.EnableSizeKB {
		t.Errorf("buffer_size_kb after enabling = %q, kernel %q", got, g.EnableSizeKB)
	}
	// The capture's warm-up: a record on each CPU, then O_TRUNC.
	first := ws[0]
	for cpu := range 2 {
		e := Entry{TS: first.ts - 50e6, CPU: cpu, Comm: g.Comm, Record: make([]byte, 12)}
		r.Write(&e)
	}
	r.Reset()

	wi := 0
	for si, sc := range g.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			for i, s := range sc.Steps {
				where := fmt.Sprintf("step %d (%s %s)", i, s.Op, s.Arg)
				for wi < len(ws) && ws[wi].sc == si && ws[wi].step == i {
					w := ws[wi]
					wi++
					if w.n < 0 {
						continue // the kernel refused it: nothing reached the buffer
					}
					re := reg.byName[w.event]
					e := Entry{TS: w.ts, CPU: w.cpu, PID: int32(w.tid), Comm: g.Comm, Event: re.ev, Tracepoint: re.name, Record: w.record()}
					r.Write(&e)
				}
				replayStep(t, where, r, reg, clock, s)
			}
		})
	}
}

func replayStep(t *testing.T, where string, r *Ring, reg *registry, clock *fakeClock, s *step) {
	want := s.text(t)
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %s differs from the kernel's (-kernel +ours):\n%s", where, what, cmp.Diff(want, got))
		}
	}
	switch s.Op {
	case "write", "write_hex", "sleep", "enable", "disable", "register":
		if s.Op == "enable" {
			if e := reg.byName[s.Arg]; e != nil {
				e.enabled = true
			}
		}
	case "trunc":
		r.Reset()
	case "tracing_on":
		r.SetTracingOn(s.Arg != "0")
	case "buffer_size_kb":
		kb, _ := strconv.Atoi(s.Arg)
		if err := r.Resize(kb); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	case "cpu_buffer_size_kb":
		kb, _ := strconv.Atoi(s.Arg)
		if err := r.ResizeCPU(*s.CPU, kb); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	case "read":
		var got string
		switch {
		case s.Arg == "buffer_size_kb":
			got = string(r.AppendBufferSizeKB(nil, -1))
		case s.Arg == "buffer_total_size_kb":
			got = string(r.AppendBufferTotalSizeKB(nil))
		case strings.HasPrefix(s.Arg, "per_cpu/cpu") && strings.HasSuffix(s.Arg, "/buffer_size_kb"):
			cpu, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(s.Arg, "per_cpu/cpu"), "/buffer_size_kb"))
			got = string(r.AppendBufferSizeKB(nil, cpu))
		case s.Arg == "tracing_on":
			got = "0\n"
			if r.TracingOn() {
				got = "1\n"
			}
		default:
			return // user_events_status belongs to the registry
		}
		check(s.Arg, got, want)
	case "trace":
		check("trace", string(r.AppendTrace(nil, -1)), want)
	case "stats":
		m := nowRE.FindStringSubmatch(want)
		sec, _ := strconv.ParseUint(m[1], 10, 64)
		us, _ := strconv.ParseUint(m[2], 10, 64)
		clock.ns = (sec*1000000 + us) * 1000
		got := string(AppendStats(nil, r.Stats(*s.CPU)))
		if strings.HasPrefix(want, "entries: 0\n") {
			// An empty buffer's "oldest event ts" is a time stamp left
			// in a page. The kernel's trace_pipe_raw hands whole pages
			// to the reader and gives the buffer another page in
			// exchange, so after raw reads its stale values differ
			// from ours: do not compare that line then.
			got = oldestRE.ReplaceAllString(got, "")
			want = oldestRE.ReplaceAllString(want, "")
		}
		check(fmt.Sprintf("cpu%d stats", *s.CPU), got, want)
	case "pipe":
		cpu := -1
		if s.CPU != nil {
			cpu = *s.CPU
		}
		text, chunks, err := readPipe(r, cpu, s.Size, s.Count)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		check("trace_pipe", text, want)
		if !cmp.Equal(chunks, s.Chunks) {
			t.Errorf("%s: read sizes %v, kernel %v", where, chunks, s.Chunks)
		}
	case "pipe2":
		replayPipe2(t, where, r, s, want)
	case "pipe_busy":
		check("trace_pipe opens", pipeBusy(r), want)
	case "raw":
		compareRaw(t, where, r, *s.CPU, s.Pages)
	case "reg_only":
		if s.Err == "" {
			id, _ := strconv.Atoi(s.Text)
			reg.add(t, s.Arg, id).fdRef = true
		}
	case "dyn":
		if cmd, ok := strings.CutPrefix(s.Arg, "u:"); ok {
			if s.Err == "" {
				reg.add(t, cmd, -1).persist = true
			}
			return
		}
		// A delete through dynamic_events: the event goes if it can, and
		// then the buffer is cleared if a deleted event had been enabled
		// (trace_dynevent.c: tracing_reset_all_online_cpus).
		name, _, _ := strings.Cut(strings.TrimPrefix(s.Arg, "!u:"), " ")
		if e := reg.byName[name]; e != nil && s.Err == "" {
			reg.remove(e)
		}
		if reg.pending {
			r.Reset()
			reg.pending = false
		}
	case "iocsdel":
		if e := reg.byName[s.Arg]; e != nil && s.Err == "" {
			reg.remove(e)
		}
	case "unreg":
	case "close_reopen":
		// The fd's registrations go; an event no longer referenced by
		// anything (not persistent, not enabled) is deleted.
		for _, e := range reg.byName {
			if e.fdRef && !e.persist && !isEnabledNow(e) {
				reg.remove(e)
			}
			e.fdRef = false
		}
	default:
		t.Fatalf("%s: unknown op", where)
	}
}

// isEnabledNow: the capture enables its four startup events for good and
// disables every other one it enables before closing.
func isEnabledNow(e *regEvent) bool {
	switch e.name {
	case "ovw", "ovw1", "ft_a", "ft_none":
		return true
	}
	return false
}

func readPipe(r *Ring, cpu, size, reads int) (string, []int, error) {
	p, err := r.OpenPipe(cpu, true)
	if err != nil {
		return "", nil, err
	}
	defer p.Close()
	if size == 0 {
		size = 65536
	}
	buf := make([]byte, size)
	var out []byte
	var chunks []int
	for i := 0; reads == 0 || i < reads; i++ {
		n, err := p.Read(context.Background(), buf)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			return "", nil, err
		}
		chunks = append(chunks, n)
		out = append(out, buf[:n]...)
	}
	return string(out), chunks, nil
}

func replayPipe2(t *testing.T, where string, r *Ring, s *step, want string) {
	before, after, _ := strings.Cut(want, "@@SPLIT@@\n")
	if s.Arg == "all" {
		// One reader got trace_pipe; the other's open failed with EBUSY.
		p, err := r.OpenPipe(-1, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.OpenPipe(-1, true); !errors.Is(err, unix.EBUSY) {
			t.Errorf("%s: second trace_pipe open: %v, want EBUSY", where, err)
		}
		p.Close()
		got, _, err := readPipe(r, -1, 256, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got != before+after {
			t.Errorf("%s: trace_pipe differs:\n%s", where, cmp.Diff(before+after, got))
		}
		return
	}
	p0, err0 := r.OpenPipe(0, true)
	p1, err1 := r.OpenPipe(1, true)
	if err0 != nil || err1 != nil {
		t.Fatalf("%s: per-CPU opens: %v, %v", where, err0, err1)
	}
	p0.Close()
	p1.Close()
	for cpu, w := range []string{before, after} {
		got, _, err := readPipe(r, cpu, 256, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("%s: per_cpu/cpu%d/trace_pipe differs:\n%s", where, cpu, cmp.Diff(w, got))
		}
	}
}

// pipeBusy mirrors the capture's pipe_busy step.
func pipeBusy(r *Ring) string {
	var out []string
	var open []*Pipe
	name := func(cpu int) string {
		if cpu < 0 {
			return "trace_pipe"
		}
		return fmt.Sprintf("per_cpu/cpu%d/trace_pipe", cpu)
	}
	errName := func(err error) string {
		var e unix.Errno
		if errors.As(err, &e) {
			return unix.ErrnoName(e)
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}
	for _, cpu := range []int{0, -1, 0, 1} {
		p, err := r.OpenPipe(cpu, true)
		out = append(out, name(cpu)+"="+errName(err))
		if err == nil {
			open = append(open, p)
		}
	}
	for _, p := range open {
		p.Close()
	}
	p, err := r.OpenPipe(-1, true)
	out = append(out, "trace_pipe after closing="+errName(err))
	if err == nil {
		p2, err2 := r.OpenPipe(-1, true)
		out = append(out, "second trace_pipe="+errName(err2))
		if err2 == nil {
			p2.Close()
		}
		p3, err3 := r.OpenPipe(1, true)
		out = append(out, "per_cpu/cpu1/trace_pipe="+errName(err3))
		if err3 == nil {
			p3.Close()
		}
		p.Close()
	}
	return strings.Join(out, "\n") + "\n"
}

// compareRaw reads cpu's trace_pipe_raw from r and compares each page with
// the kernel's: header, event words and records (not the bytes the kernel
// leaves stale).
func compareRaw(t *testing.T, where string, r *Ring, cpu int, pages []string) {
	var got []rawPage
	for {
		b, ok := r.ReadRawPage(nil, cpu)
		if !ok {
			break
		}
		got = append(got, parseRawPage(t, b))
	}
	if len(got) != len(pages) {
		t.Errorf("%s: %d raw pages, kernel %d", where, len(got), len(pages))
	}
	for i := range min(len(got), len(pages)) {
		b, _ := base64.StdEncoding.DecodeString(pages[i])
		k := parseRawPage(t, b)
		o := got[i]
		if o.ts != k.ts || o.commit != k.commit || o.lost != k.lost {
			t.Errorf("%s: page %d: ts/commit/lost %d/%#x/%d, kernel %d/%#x/%d", where, i, o.ts, o.commit, o.lost, k.ts, k.commit, k.lost)
		}
		if !cmp.Equal(o.words, k.words) {
			t.Errorf("%s: page %d: event words differ (-kernel +ours):\n%s", where, i, cmp.Diff(k.words, o.words))
		}
		if len(o.datas) != len(k.datas) {
			continue
		}
		for j := range o.datas {
			// The kernel leaves the up to 3 bytes that round a record up
			// stale, and ours are zero: there, compare only our non-zero
			// bytes, which are the record's.
			od, kd := o.datas[j], k.datas[j]
			ok := len(od) == len(kd)
			for x := 0; ok && x < len(od); x++ {
				if od[x] != kd[x] && (x < len(od)-3 || od[x] != 0) {
					ok = false
				}
			}
			if !ok {
				t.Errorf("%s: page %d event %d: record %x, kernel %x", where, i, j, od, kd)
			}
		}
	}
}
