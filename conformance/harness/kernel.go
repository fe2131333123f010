package harness

import (
	"cmp"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/perfring"
	"github.com/uetrace/uetrace/internal/procfs"
)

// TracefsRoot is where the kernel backend finds tracefs.
var TracefsRoot = "/sys/kernel/tracing"

// kernelProc is this OS process on the real kernel. Every ioctl runs on
// the thread that called newKernelProc (the driver locks it): the kernel
// keeps enablers per task.
type kernelProc struct {
	mem      []byte // the enable page, then a PROT_NONE page, then a PROT_READ page
	regBuf   []byte // two pages: user_reg is copied to the end of the first; the second is PROT_NONE
	spawner  spawner
	filesys  kernelFS
	perfList []*kernelPerf
	// noPerf: the tree is uetrace's FUSE one, whose events the kernel's
	// perf_event_open does not know (their IDs may name other
	// tracepoints), so perf steps are unsupported.
	noPerf bool
}

// spawner runs scenario text in a new process of the same backend.
type spawner func(text string) ([]byte, error)

func newKernelProc(spawn spawner) (*kernelProc, error) {
	pg := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 3*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	if err := unix.Mprotect(mem[pg:2*pg], unix.PROT_NONE); err != nil {
		return nil, err
	}
	if err := unix.Mprotect(mem[2*pg:], unix.PROT_READ); err != nil {
		return nil, err
	}
	regBuf, err := unix.Mmap(-1, 0, 2*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	if err := unix.Mprotect(regBuf[pg:], unix.PROT_NONE); err != nil {
		return nil, err
	}
	return &kernelProc{mem: mem, regBuf: regBuf, spawner: spawn, filesys: kernelFS(TracefsRoot)}, nil
}

func (k *kernelProc) page() []byte   { return k.mem[:os.Getpagesize()] }
func (k *kernelProc) base() uint64   { return uint64(uintptr(unsafe.Pointer(&k.mem[0]))) }
func (k *kernelProc) fs() fileSystem { return k.filesys }

func (k *kernelProc) special(name string) (uint64, bool) { return specialAddr(k.base(), name) }

func (k *kernelProc) open(mode int) (dataFile, error) {
	flags := unix.O_RDWR
	if mode != 0 {
		flags = mode &^ openModeSet
	}
	fd, err := unix.Open(filepath.Join(TracefsRoot, "user_events_data"), flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &kernelData{k: k, fd: fd}, nil
}

func (k *kernelProc) protect(writable bool) error {
	prot := unix.PROT_READ
	if writable {
		prot |= unix.PROT_WRITE
	}
	return unix.Mprotect(k.page(), prot)
}

func (k *kernelProc) child(steps []Step) ([]byte, error) { return k.spawner(source(steps)) }

func (k *kernelProc) exit() {
	for _, p := range k.perfList {
		p.close()
	}
}

type kernelData struct {
	k  *kernelProc
	fd int
}

// place copies b to the end of the readable page of regBuf, so that
// reading past b faults, and returns its address.
func (d *kernelData) place(b []byte) uintptr {
	pg := os.Getpagesize()
	clear(d.k.regBuf[:pg])
	at := pg - len(b)
	copy(d.k.regBuf[at:pg], b)
	return uintptr(unsafe.Pointer(&d.k.regBuf[at]))
}

func (d *kernelData) ioctl(req uintptr, arg uintptr) error {
	r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), req, arg)
	if e != 0 {
		return e
	}
	if r != 0 {
		return abi.RetError(int(r))
	}
	return nil
}

func (d *kernelData) reg(raw []byte, name string, nameFault bool) (uint32, error) {
	cname := append([]byte(name), 0)
	ptr := uint64(uintptr(unsafe.Pointer(&cname[0])))
	if nameFault {
		ptr, _ = d.k.special("unmapped")
	}
	raw = slices.Clone(raw)
	if len(raw) >= 24 {
		binary.LittleEndian.PutUint64(raw[16:], ptr)
	}
	at := d.place(raw)
	err := d.ioctl(abi.IocSReg, at)
	runtime.KeepAlive(cname)
	if err != nil {
		return 0, err
	}
	pg := os.Getpagesize()
	return binary.LittleEndian.Uint32(d.k.regBuf[pg-len(raw)+24:]), nil
}

func (d *kernelData) unreg(raw []byte) error {
	return d.ioctl(abi.IocSUnreg, d.place(raw))
}

func (d *kernelData) del(name string, fault bool) error {
	cname := append([]byte(name), 0)
	ptr := uintptr(unsafe.Pointer(&cname[0]))
	if fault {
		a, _ := d.k.special("unmapped")
		ptr = uintptr(a)
	}
	err := d.ioctl(abi.IocSDel, ptr)
	runtime.KeepAlive(cname)
	return err
}

// rawIovec is struct iovec with a plain address, which may be unmapped.
type rawIovec struct {
	base uintptr
	len  uint64
}

func (d *kernelData) writev(iov []iovec) (int, error) {
	vecs := make([]rawIovec, len(iov))
	unmapped, _ := d.k.special("unmapped")
	for i, v := range iov {
		switch {
		case v.fault != 0:
			vecs[i] = rawIovec{uintptr(unmapped), uint64(v.fault)}
		case len(v.b) > 0:
			vecs[i] = rawIovec{uintptr(unsafe.Pointer(&v.b[0])), uint64(len(v.b))}
		}
	}
	var p unsafe.Pointer
	if len(vecs) > 0 {
		p = unsafe.Pointer(&vecs[0])
	}
	n, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(d.fd), uintptr(p), uintptr(len(vecs)))
	runtime.KeepAlive(iov)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func (d *kernelData) write(b []byte, off int64) (int, error) {
	if off != 0 {
		return unix.Pwrite(d.fd, b, off)
	}
	// unix.Write of an empty slice still makes the system call.
	return unix.Write(d.fd, b)
}

func (d *kernelData) close() error { return unix.Close(d.fd) }

// kernelFS is tracefs itself.
type kernelFS string

func (f kernelFS) path(p string) string { return filepath.Join(string(f), p) }

func (f kernelFS) read(p string) ([]byte, error) { return os.ReadFile(f.path(p)) }

func (f kernelFS) write(p string, flag int, data []byte) (int, error) {
	fd, err := unix.Open(f.path(p), unix.O_WRONLY|unix.O_CLOEXEC|flag, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if data == nil {
		return 0, nil
	}
	return unix.Write(fd, data)
}

func (f kernelFS) readDir(p string) ([]string, error) {
	ents, err := os.ReadDir(f.path(p))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

func (f kernelFS) exists(p string) bool {
	_, err := os.Stat(f.path(p))
	return err == nil
}

// kernelPerf is perf_event_open(PERF_TYPE_TRACEPOINT) on every online CPU
// for every task, as perf record -a does, with raw data and time.
type kernelPerf struct {
	rings []*perfring.Ring
}

// setFilter gives every CPU's perf event the filter, as perf record
// --filter does; the first error is the answer.
func (p *kernelPerf) setFilter(text string) error {
	b := append([]byte(text), 0)
	for _, r := range p.rings {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(r.FD), unix.PERF_EVENT_IOC_SET_FILTER, uintptr(unsafe.Pointer(&b[0])))
		if errno != 0 {
			return errno
		}
	}
	runtime.KeepAlive(b)
	return nil
}

func (k *kernelProc) perf(system, name string) (perfReader, error) {
	if k.noPerf {
		return nil, errUnsupported
	}
	idText, err := k.filesys.read(filepath.Join("events", system, name, "id"))
	if err != nil {
		return nil, err
	}
	var id uint64
	for _, c := range idText {
		if c >= '0' && c <= '9' {
			id = id*10 + uint64(c-'0')
		}
	}
	cpus, err := procfs.OnlineCPUs()
	if err != nil {
		return nil, err
	}
	p := &kernelPerf{}
	for _, cpu := range cpus {
		attr := unix.PerfEventAttr{
			Type:        unix.PERF_TYPE_TRACEPOINT,
			Config:      id,
			Sample:      1,
			Sample_type: unix.PERF_SAMPLE_RAW | unix.PERF_SAMPLE_TIME,
			Wakeup:      1,
		}
		fd, err := perfring.Open(&attr, -1, cpu)
		if err != nil {
			p.close()
			return nil, err
		}
		ring, err := perfring.NewRing(fd, 8)
		if err != nil {
			unix.Close(fd)
			p.close()
			return nil, err
		}
		p.rings = append(p.rings, ring)
	}
	k.perfList = append(k.perfList, p)
	return p, nil
}

// read takes the samples from every ring, in time order, and returns their
// raw data after the 8-byte common header. A PERF_RECORD_SAMPLE of
// PERF_SAMPLE_TIME|PERF_SAMPLE_RAW is perf_event_header {u32 type, u16 misc,
// u16 size}, the u64 time, the u32 size of the raw data and the raw data.
func (p *kernelPerf) read() ([][]byte, error) {
	type sample struct {
		time uint64
		data []byte
	}
	var all []sample
	for _, r := range p.rings {
		r.Read(func(rec []byte) {
			if binary.NativeEndian.Uint32(rec) != unix.PERF_RECORD_SAMPLE || len(rec) < 20 {
				return
			}
			n := uint64(binary.NativeEndian.Uint32(rec[16:]))
			if n < 8 || 20+n > uint64(len(rec)) {
				return
			}
			all = append(all, sample{binary.NativeEndian.Uint64(rec[8:]), slices.Clone(rec[28 : 20+n])})
		})
	}
	slices.SortStableFunc(all, func(a, b sample) int { return cmp.Compare(a.time, b.time) })
	out := make([][]byte, len(all))
	for i, s := range all {
		out[i] = s.data
	}
	return out, nil
}

func (p *kernelPerf) close() error {
	for _, r := range p.rings {
		r.Close()
	}
	p.rings = nil
	return nil
}
