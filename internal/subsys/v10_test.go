package subsys

import (
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// v10Reg is the v10 struct user_reg with size, name_args 0 (the name
// comes in RegisterArgs), and n bytes in all.
func v10Reg(size uint32, n int) []byte {
	b := binary.NativeEndian.AppendUint32(nil, size)
	if n < 4 {
		return b[:n]
	}
	return append(b, make([]byte, n-4)...)
}

// TestRegisterV10: the v10 ABI's registration — the struct's size checks,
// a write index in the file, a status index for the event (never 0, the
// same for another file's registration of it), and no enabler.
func TestRegisterV10(t *testing.T) {
	e := newEnv(t)
	f := e.s.Open()
	defer f.Close()
	for _, tc := range []struct {
		reg  []byte
		want error
	}{
		{v10Reg(24, 2), unix.EFAULT},
		{v10Reg(24, 20), unix.EFAULT},
		{v10Reg(20, 24), unix.EINVAL},
		{v10Reg(5000, 24), unix.E2BIG},
		{append(v10Reg(28, 24), 0, 0, 0, 1), unix.E2BIG},
	} {
		if _, _, err := f.RegisterV10(root, RegisterArgs{Reg: tc.reg, Name: "v10_a u32 a"}); !errors.Is(err, tc.want) {
			t.Errorf("%d bytes %x: %v, want %v", len(tc.reg), tc.reg[:min(4, len(tc.reg))], err, tc.want)
		}
	}
	wi, si, err := f.RegisterV10(root, RegisterArgs{Reg: v10Reg(24, 24), Name: "v10_a u32 a"})
	if err != nil || wi != 0 || si == 0 {
		t.Fatalf("v10_a: write index %d, status index %d, %v", wi, si, err)
	}
	wi2, si2, err := f.RegisterV10(root, RegisterArgs{Reg: v10Reg(24, 24), Name: "v10_b"})
	if err != nil || wi2 != 1 || si2 == 0 || si2 == si {
		t.Fatalf("v10_b: write index %d, status index %d (v10_a's %d), %v", wi2, si2, si, err)
	}
	g := e.s.Open()
	defer g.Close()
	if wi, si3, err := g.RegisterV10(root, RegisterArgs{Reg: v10Reg(24, 24), Name: "v10_a u32 a"}); err != nil || wi != 0 || si3 != si {
		t.Errorf("v10_a from another file: write index %d, status index %d (want %d), %v", wi, si3, si, err)
	}
	if _, _, err := f.RegisterV10(root, RegisterArgs{Reg: v10Reg(24, 24), NameFault: true}); !errors.Is(err, unix.EFAULT) {
		t.Errorf("an unreadable name: %v", err)
	}
	// The status page's writer.
	page := map[int]uint32{}
	stop := e.s.WatchStatus(func(i int, st uint32) { page[i] = st })
	if st, ok := page[int(si)]; !ok || st != 0 {
		t.Errorf("the page's byte of v10_a: %v (told %v), want 0", st, ok)
	}
	e.enable("v10_a", true)
	if page[int(si)] != StatusFtrace || page[int(si2)] != 0 {
		t.Errorf("enabled v10_a: page %v", page)
	}
	stop()
	e.enable("v10_a", false)
	if page[int(si)] != StatusFtrace {
		t.Error("a stopped watch was told")
	}
}
