package abi

import (
	"runtime"
	"testing"
	"unsafe"
)

func TestLayout(t *testing.T) {
	var r UserReg
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"Size", unsafe.Offsetof(r.Size), 0},
		{"EnableBit", unsafe.Offsetof(r.EnableBit), 4},
		{"EnableSize", unsafe.Offsetof(r.EnableSize), 5},
		{"Flags", unsafe.Offsetof(r.Flags), 6},
		{"EnableAddr", unsafe.Offsetof(r.EnableAddr), 8},
		{"NameArgs", unsafe.Offsetof(r.NameArgs), 16},
		{"WriteIndex", unsafe.Offsetof(r.WriteIndex), 24},
		{"end of WriteIndex", unsafe.Offsetof(r.WriteIndex) + unsafe.Sizeof(r.WriteIndex), UserRegSize},
	} {
		if c.got != c.want {
			t.Errorf("UserReg.%s: offset %d, want %d", c.name, c.got, c.want)
		}
	}
	if s := unsafe.Sizeof(r); s < UserRegSize {
		t.Errorf("sizeof(UserReg) = %d < %d", s, UserRegSize)
	}

	var u UserUnreg
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"Size", unsafe.Offsetof(u.Size), 0},
		{"DisableBit", unsafe.Offsetof(u.DisableBit), 4},
		{"Reserved", unsafe.Offsetof(u.Reserved), 5},
		{"Reserved2", unsafe.Offsetof(u.Reserved2), 6},
		{"DisableAddr", unsafe.Offsetof(u.DisableAddr), 8},
		{"sizeof", unsafe.Sizeof(u), UserUnregSize},
	} {
		if c.got != c.want {
			t.Errorf("UserUnreg.%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	if unsafe.Sizeof(uintptr(0)) == 8 && unsafe.Sizeof(r) != 32 {
		t.Errorf("sizeof(UserReg) = %d on 64-bit, want 32 (28 + tail padding)", unsafe.Sizeof(r))
	}
}

func TestIoctlNumbers(t *testing.T) {
	want := map[string][3]uintptr{
		"amd64":   {0xC0082A00, 0x40082A01, 0x40082A02},
		"arm64":   {0xC0082A00, 0x40082A01, 0x40082A02},
		"riscv64": {0xC0082A00, 0x40082A01, 0x40082A02},
		"386":     {0xC0042A00, 0x40042A01, 0x40042A02},
		"arm":     {0xC0042A00, 0x40042A01, 0x40042A02},
		"ppc64le": {0xC0082A00, 0x80082A01, 0x80082A02},
		"ppc64":   {0xC0082A00, 0x80082A01, 0x80082A02},
		"mips64":  {0xC0082A00, 0x80082A01, 0x80082A02},
		"mipsle":  {0xC0042A00, 0x80042A01, 0x80042A02},
	}
	w, ok := want[runtime.GOARCH]
	if !ok {
		t.Skipf("no expected values for %s", runtime.GOARCH)
	}
	got := [3]uintptr{IocSReg, IocSDel, IocSUnreg}
	if got != w {
		t.Errorf("ioctl numbers = %#x, want %#x", got, w)
	}
}

func TestDynLoc(t *testing.T) {
	for _, c := range []struct {
		off, size uint16
		want      uint32
	}{
		{0, 0, 0},
		{0, 5, 0x00050000},
		{1024, 5, 0x00050400},
		{45, 3, 0x0003002d},
		{0xffff, 0xffff, 0xffffffff},
	} {
		if got := DynLoc(c.off, c.size); got != c.want {
			t.Errorf("DynLoc(%d, %d) = %#x, want %#x", c.off, c.size, got, c.want)
		}
	}
}

func TestFlags(t *testing.T) {
	if RegPersist != 1 || RegMultiFormat != 2 || RegMax != 4 {
		t.Errorf("flags = %d %d %d, want 1 2 4", RegPersist, RegMultiFormat, RegMax)
	}
}

func TestBytesMatchMemoryLayout(t *testing.T) {
	r := UserReg{Size: UserRegSize, EnableBit: 3, EnableSize: 8, Flags: RegPersist, EnableAddr: 0x1122334455667788, NameArgs: 0x99, WriteIndex: 7}
	if got, want := r.Bytes(), unsafe.Slice((*byte)(unsafe.Pointer(&r)), UserRegSize); string(got) != string(want) {
		t.Errorf("UserReg.Bytes %x, memory %x", got, want)
	}
	u := UserUnreg{Size: UserUnregSize, DisableBit: 5, Reserved: 1, Reserved2: 2, DisableAddr: 0xabc}
	if got, want := u.Bytes(), unsafe.Slice((*byte)(unsafe.Pointer(&u)), UserUnregSize); string(got) != string(want) {
		t.Errorf("UserUnreg.Bytes %x, memory %x", got, want)
	}
}
