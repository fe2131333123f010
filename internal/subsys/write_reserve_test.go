package subsys

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestInvalidWriteChangesNothing writes the same valid records to two
// subsystems whose only consumer is the trace buffer — the path that
// assembles each record in the buffer itself and validates it there — and
// to the second invalid ones between them, on every CPU, long enough to
// fill sub-buffers. Each invalid write is EFAULT, and both subsystems
// must then show the same: trace text, raw pages, stats and counts.
func TestInvalidWriteChangesNothing(t *testing.T) {
	now := uint64(1_000_000_000)
	env := func() (*tenv, *File, uint32) {
		s := New(Options{NumCPU: 2, Clock: clockAt(&now)})
		mem := newMem()
		e := &tenv{t: t, s: s, mem: mem, p: s.NewProcess(mem)}
		f := s.Open()
		t.Cleanup(func() { f.Close() })
		idx, err := e.reg(f, "inv u32 a; __rel_loc char[] s", 31, 0)
		if err != nil {
			t.Fatal(err)
		}
		e.enable("inv", true)
		return e, f, idx
	}
	ea, fa, ia := env()
	eb, fb, ib := env()
	payload := func(a uint32, s string, bad int) []byte {
		p := binary.NativeEndian.AppendUint32(nil, a)
		n := len(s) + 1
		switch bad {
		case 1: // the string runs past the record's end
			n += 3
		case 2: // not NUL-terminated
			return append(binary.NativeEndian.AppendUint32(p, uint32(len(s)+1)<<16), s+"x"...)
		}
		p = binary.NativeEndian.AppendUint32(p, uint32(n)<<16)
		p = append(p, s...)
		return append(p, 0)
	}
	for i := range 600 {
		now += uint64(i%7) * 1_000_000_000 / 3
		w := Writer{PID: int32(100 + i%3), TGID: 100, Comm: fmt.Sprintf("w%d", i%3), CPU: i % 3}
		s := string(bytes.Repeat([]byte{'a' + byte(i%26)}, i%150))
		for bad := 1; bad <= 2 && i%5 == 0; bad++ {
			if _, err := fb.Writev(w, le32(ib), payload(uint32(i), s, bad)); !errors.Is(err, unix.EFAULT) {
				t.Fatalf("write %d, invalid (%d): %v, want EFAULT", i, bad, err)
			}
		}
		p := payload(uint32(i), s, 0)
		na, erra := fa.Writev(w, le32(ia), p)
		nb, errb := fb.Writev(w, le32(ib), p[:3], p[3:])
		if erra != nil || errb != nil || na != nb {
			t.Fatalf("write %d: %d, %v and %d, %v", i, na, erra, nb, errb)
		}
		if i%50 != 0 {
			continue
		}
		if a, b := ea.read(FileTrace), eb.read(FileTrace); a != b {
			t.Fatalf("after write %d the traces differ:\n%s\nand:\n%s", i, a, b)
		}
	}
	for cpu := range 2 {
		if a, b := ea.s.trace.ring.Stats(cpu), eb.s.trace.ring.Stats(cpu); a != b {
			t.Errorf("cpu %d stats %+v and %+v", cpu, a, b)
		}
		for {
			pa, oka := ea.s.trace.ring.ReadRawPage(nil, cpu)
			pb, okb := eb.s.trace.ring.ReadRawPage(nil, cpu)
			if oka != okb || !bytes.Equal(pa, pb) {
				t.Fatalf("cpu %d: raw pages differ", cpu)
			}
			if !oka {
				break
			}
		}
	}
	if a, b := ea.s.AppendCounts(nil), eb.s.AppendCounts(nil); !bytes.Equal(a, b) {
		t.Errorf("counts %q and %q", a, b)
	}
}
