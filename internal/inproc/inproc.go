// Package inproc is user_events inside this process: a subsys.Subsystem
// reached as userevents reaches Linux's — user_events_data files whose
// registrations set enable bits in this process's own memory and whose
// writes land synchronously in the subsystem's buffers — and its tracefs
// tree as package tracefs reads it. No socket, no FUSE, no other process.
//
// package userevents/usereventstest is its public face; uetrace's own tests
// and `uetrace demo` use it on a subsystem of their choosing.
package inproc

import (
	"io"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/caps"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/internal/stamp"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// Kernel is a subsystem as this process's user_events.
type Kernel struct {
	sys  *subsys.Subsystem
	cred subsys.Cred
}

// New is sys as this process's user_events. This process is perfmon_capable
// there when it is on Linux (CAP_PERFMON or CAP_SYS_ADMIN).
func New(sys *subsys.Subsystem) *Kernel {
	return &Kernel{sys: sys, cred: subsys.Cred{PerfmonCapable: caps.PerfmonCapable(0)}}
}

// Subsystem is the kernel's subsystem.
func (k *Kernel) Subsystem() *subsys.Subsystem { return k.sys }

// Options select this kernel for userevents.Open.
func (k *Kernel) Options() *userevents.Options {
	return &userevents.Options{OpenData: k.OpenData}
}

// OpenData opens a user_events_data of this kernel.
func (k *Kernel) OpenData() (userevents.DataFile, error) {
	return &dataFile{k: k, f: k.sys.Open(), p: process(k.sys)}, nil
}

// Tracefs is this kernel's tracefs tree.
func (k *Kernel) Tracefs() *tracefs.Tracefs { return tracefs.New(treeFS{k}) }

var (
	procsMu sync.Mutex
	procs   = map[*subsys.Subsystem]*subsys.Process{}
)

// process is this process as sys sees it: one per subsystem, shared by
// every file open on it, as a process's user_event_mm is.
func process(sys *subsys.Subsystem) *subsys.Process {
	procsMu.Lock()
	defer procsMu.Unlock()
	p := procs[sys]
	if p == nil {
		p = sys.NewProcess(selfMemory{})
		procs[sys] = p
	}
	return p
}

// dataFile is one open user_events_data of a Kernel.
type dataFile struct {
	k *Kernel
	f *subsys.File
	p *subsys.Process
}

func (d *dataFile) Register(reg []byte, name string) (uint32, error) {
	return d.f.Register(d.p, d.k.cred, subsys.RegisterArgs{Reg: reg, Name: name})
}

func (d *dataFile) Unregister(unreg []byte) error { return d.f.Unregister(d.p, unreg) }

func (d *dataFile) Delete(name string) error { return d.f.Delete(name, d.k.cred) }

// Writev writes as this thread, on this CPU (internal/stamp: no system
// call each).
func (d *dataFile) Writev(iov ...[]byte) (int, error) {
	tid, cpu := stamp.TidCPU()
	return d.f.Writev(subsys.Writer{PID: tid, TGID: pid, Comm: comm(), CPU: int(cpu)}, iov...)
}

func (d *dataFile) Close() error { return d.f.Close() }

// selfMemory is this process's memory as the subsystem writes enable bits
// there: atomically, as the kernel's set_bit does, and an address nothing
// is mapped at (or that is read-only) is an error, as the kernel's fault
// handling makes it, not a crash.
type selfMemory struct{}

func (selfMemory) SetBit(addr uint64, bit uint, on bool) (err error) {
	if addr%8 != 0 || bit > 63 {
		return unix.EINVAL
	}
	// The address comes back as a pointer by a load, not a conversion,
	// which go vet would take for arithmetic on a pointer.
	w := *(**uint64)(unsafe.Pointer(&addr))
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			err = unix.EFAULT
		}
	}()
	if on {
		atomic.OrUint64(w, 1<<bit)
	} else {
		atomic.AndUint64(w, ^(uint64(1) << bit))
	}
	return nil
}

// treeFS is a Kernel's tracefs tree, for package tracefs.
type treeFS struct{ k *Kernel }

func (t treeFS) Open(name string, flag int) (io.ReadWriteCloser, error) {
	return t.k.sys.FS().Open(name, flag, t.k.cred)
}

func (t treeFS) ReadDir(name string) ([]tracefs.DirEntry, error) {
	ents, err := t.k.sys.FS().ReadDir(name)
	if err != nil {
		return nil, err
	}
	out := make([]tracefs.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = tracefs.DirEntry{Name: e.Name, IsDir: e.Mode.IsDir()}
	}
	return out, nil
}

var pid = int32(os.Getpid())

var comm = sync.OnceValue(func() string {
	if s, _ := procfs.Comm(os.Getpid()); s != "" {
		return s
	}
	return "<...>"
})
