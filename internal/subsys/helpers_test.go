package subsys

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
)

// fakeMem is a process's memory for tests: words of 8 bytes from base.
type fakeMem struct {
	base     uint64
	words    []atomic.Uint64
	readOnly atomic.Bool
}

func newMem() *fakeMem { return &fakeMem{base: 0x10000, words: make([]atomic.Uint64, 64)} }

func (m *fakeMem) SetBit(addr uint64, bit uint, on bool) error {
	if m.readOnly.Load() {
		return errors.New("read-only")
	}
	if addr < m.base || addr%8 != 0 || (addr-m.base)/8 >= uint64(len(m.words)) || bit > 63 {
		return fmt.Errorf("address %#x not mapped", addr)
	}
	w := &m.words[(addr-m.base)/8]
	if on {
		w.Or(1 << bit)
	} else {
		w.And(^(uint64(1) << bit))
	}
	return nil
}

// u32 reads the 32-bit value at addr (little-endian halves of the words).
func (m *fakeMem) u32(addr uint64) uint32 {
	w := m.words[(addr&^7-m.base)/8].Load()
	if addr%8 != 0 {
		return uint32(w >> 32)
	}
	return uint32(w)
}

// fork copies the memory, as a fork's copy-on-write view starts equal.
func (m *fakeMem) fork() *fakeMem {
	c := &fakeMem{base: m.base, words: make([]atomic.Uint64, len(m.words))}
	for i := range m.words {
		c.words[i].Store(m.words[i].Load())
	}
	return c
}

var (
	root = Cred{PerfmonCapable: true}
	user = Cred{}
)

type tenv struct {
	t   *testing.T
	s   *Subsystem
	mem *fakeMem
	p   *Process
}

func newEnv(t *testing.T) *tenv {
	s := New(Options{})
	mem := newMem()
	return &tenv{t: t, s: s, mem: mem, p: s.NewProcess(mem)}
}

// check is the enable word most tests use.
const check = 0x10000

func regArgs(cmd string, addr uint64, bit, size uint8, flags uint16) RegisterArgs {
	return RegisterArgs{Reg: abi.UserReg{Size: abi.UserRegSize, EnableBit: bit, EnableSize: size, Flags: flags, EnableAddr: addr}.Bytes(), Name: cmd}
}

func (e *tenv) reg(f *File, cmd string, bit uint8, flags uint16) (uint32, error) {
	return f.Register(e.p, root, regArgs(cmd, check, bit, 4, flags))
}

func unregArgs(addr uint64, bit uint8) []byte {
	return abi.UserUnreg{Size: abi.UserUnregSize, DisableBit: bit, DisableAddr: addr}.Bytes()
}

func (e *tenv) unreg(bit uint8) error {
	f := e.s.Open()
	defer f.Close()
	return f.Unregister(e.p, unregArgs(check, bit))
}

func (e *tenv) read(path string) string {
	e.t.Helper()
	b, err := e.s.FS().ReadFile(path, root)
	if err != nil {
		e.t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func (e *tenv) write(path, text string) error {
	return e.s.FS().WriteFile(path, []byte(text), os.O_APPEND, root)
}

func (e *tenv) enable(name string, on bool) {
	e.t.Helper()
	v := "0"
	if on {
		v = "1"
	}
	if err := e.write("events/user_events/"+name+"/enable", v); err != nil {
		e.t.Fatalf("enable %s=%v: %v", name, on, err)
	}
}

func (e *tenv) exists(name string) bool {
	_, err := e.s.FS().Stat("events/user_events/" + name + "/enable")
	return err == nil
}

func wantErrno(t *testing.T, what string, err error, want unix.Errno) {
	t.Helper()
	if want == 0 {
		if err != nil {
			t.Errorf("%s: %v, want success", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %s", what, err, unix.ErrnoName(want))
	}
}

var w0 = Writer{PID: 100, TGID: 100, Comm: "test", CPU: 0}

func le32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
