package conform

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
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

// kernelPerf is perf_event_open(PERF_TYPE_TRACEPOINT) on every CPU for
// every task, as perf record -a does, with raw data and time.
type kernelPerf struct {
	fds   []int
	rings [][]byte
	tails []uint64
}

func (k *kernelProc) perf(system, name string) (perfReader, error) {
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
	p := &kernelPerf{}
	pg := os.Getpagesize()
	for cpu := range runtime.NumCPU() {
		attr := unix.PerfEventAttr{
			Type:        unix.PERF_TYPE_TRACEPOINT,
			Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
			Config:      id,
			Sample:      1,
			Sample_type: unix.PERF_SAMPLE_RAW | unix.PERF_SAMPLE_TIME,
			Wakeup:      1,
		}
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			p.close()
			return nil, err
		}
		ring, err := unix.Mmap(fd, 0, (1+8)*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			p.close()
			return nil, err
		}
		p.fds = append(p.fds, fd)
		p.rings = append(p.rings, ring)
		p.tails = append(p.tails, 0)
	}
	k.perfList = append(k.perfList, p)
	return p, nil
}

// read takes the samples from every ring: perf_event_header {u32 type,
// u16 misc, u16 size}, then for PERF_RECORD_SAMPLE the u64 time and the
// u32 size of the raw data. Samples are returned in time order.
func (p *kernelPerf) read() ([][]byte, error) {
	type sample struct {
		time uint64
		data []byte
	}
	var all []sample
	for i, ring := range p.rings {
		head := atomic.LoadUint64((*uint64)(unsafe.Pointer(&ring[1024])))
		off := binary.LittleEndian.Uint64(ring[1040:])
		size := binary.LittleEndian.Uint64(ring[1048:])
		data := ring[off : off+size]
		byteAt := func(pos uint64) byte { return data[pos%size] }
		get := func(pos, n uint64) []byte {
			b := make([]byte, n)
			for j := range n {
				b[j] = byteAt(pos + j)
			}
			return b
		}
		for tail := p.tails[i]; tail < head; {
			h := get(tail, 8)
			typ := binary.LittleEndian.Uint32(h)
			sz := uint64(binary.LittleEndian.Uint16(h[6:]))
			if sz == 0 {
				break
			}
			if typ == unix.PERF_RECORD_SAMPLE {
				t := binary.LittleEndian.Uint64(get(tail+8, 8))
				n := uint64(binary.LittleEndian.Uint32(get(tail+16, 4)))
				raw := get(tail+20, n)
				if len(raw) >= 8 {
					all = append(all, sample{t, raw[8:]})
				}
			}
			tail += sz
		}
		p.tails[i] = head
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&ring[1032])), head) // data_tail
	}
	slices.SortStableFunc(all, func(a, b sample) int {
		switch {
		case a.time < b.time:
			return -1
		case a.time > b.time:
			return 1
		}
		return 0
	})
	out := make([][]byte, len(all))
	for i, s := range all {
		out[i] = s.data
	}
	return out, nil
}

func (p *kernelPerf) close() error {
	for _, r := range p.rings {
		unix.Munmap(r)
	}
	for _, fd := range p.fds {
		unix.Close(fd)
	}
	p.rings, p.fds = nil, nil
	return nil
}
