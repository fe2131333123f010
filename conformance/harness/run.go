package harness

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/abi"
	"github.com/uetrace/uetrace/internal/daemon/wire"
)

// proc is one process of a backend: its user_events_data files, its enable
// memory, and the tracefs it sees.
type proc interface {
	// open opens user_events_data with O_RDWR or, if not 0, this mode.
	open(mode int) (dataFile, error)
	fs() fileSystem
	// page is the process's page of enable memory; base its address.
	page() []byte
	base() uint64
	// special resolves addr=null|kernel|unmapped|readonly.
	special(name string) (uint64, bool)
	perf(system, name string) (perfReader, error)
	// protect makes the enable page read-only or writable again.
	protect(writable bool) error
	// child runs steps in a new process and returns its raw output.
	child(steps []Step) ([]byte, error)
	exit()
}

// dataFile is one open user_events_data.
type dataFile interface {
	// reg is DIAG_IOCSREG of struct user_reg raw (its name_args is filled
	// in here); all of raw is readable, nothing past it.
	reg(raw []byte, name string, nameFault bool) (uint32, error)
	unreg(raw []byte) error
	del(name string, fault bool) error
	writev(iov []iovec) (int, error)
	write(b []byte, off int64) (int, error)
	close() error
}

// iovec is one writev buffer; fault ones point at unmapped memory.
type iovec struct {
	b     []byte
	fault int
}

// fileSystem is the tracefs a process sees.
type fileSystem interface {
	read(path string) ([]byte, error)
	// write opens path O_WRONLY|flag and writes data in one write(2).
	write(path string, flag int, data []byte) (int, error)
	readDir(path string) ([]string, error)
	exists(path string) bool
}

// perfReader is a perf event on one tracepoint.
type perfReader interface {
	// read returns the payloads of the samples received since the last read.
	read() ([][]byte, error)
	// setFilter is PERF_EVENT_IOC_SET_FILTER.
	setFilter(text string) error
	close() error
}

// openModeSet marks an explicit open mode (O_RDONLY is 0).
const openModeSet = 1 << 30

// errUnsupported is a step a backend cannot express; it prints as such and
// the scenario then differs (known-differences.txt says why).
var errUnsupported = errors.New("unsupported")

// runner runs the steps of one process and writes their raw results.
type runner struct {
	p     proc
	out   *bytes.Buffer
	files map[string]dataFile
	perfs map[string]perfReader
	// readonly: the enable page is protected, and setmem would fault.
	readonly bool
}

func runSteps(p proc, steps []Step, out *bytes.Buffer) {
	r := &runner{p: p, out: out, files: map[string]dataFile{}, perfs: map[string]perfReader{}}
	for _, st := range steps {
		fmt.Fprintf(out, "> %s\n", st.Text)
		r.step(st)
	}
	for _, pr := range r.perfs {
		pr.close()
	}
	for _, f := range r.files {
		f.close()
	}
}

func (r *runner) printf(format string, args ...any) { fmt.Fprintf(r.out, format, args...) }

func (r *runner) result(err error) {
	if err == nil {
		r.printf("= ok\n")
		return
	}
	r.printf("= %s\n", errText(err))
}

// errText is the errno's name, or what else went wrong.
func errText(err error) string {
	var ret abi.RetError
	if errors.As(err, &ret) {
		return fmt.Sprintf("ret %d", int(ret))
	}
	var re *wire.RemoteError
	if errors.As(err, &re) {
		return errnoName(re.Errno)
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errnoName(errno)
	}
	if errors.Is(err, errUnsupported) {
		return "unsupported"
	}
	return "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
}

func errnoName(e unix.Errno) string {
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", int(e))
}

func (r *runner) file(name string) (dataFile, bool) {
	f, ok := r.files[name]
	if !ok {
		r.printf("= error: no open file %s\n", name)
	}
	return f, ok
}

func (r *runner) step(st Step) {
	pos, kv := st.options()
	switch st.Verb {
	case "open":
		if _, dup := r.files[pos[0]]; dup {
			r.printf("= error: %s is already open\n", pos[0])
			return
		}
		mode := 0
		if len(pos) == 2 {
			switch pos[1] {
			case "rdonly":
				mode = unix.O_RDONLY | openModeSet
			case "wronly":
				mode = unix.O_WRONLY | openModeSet
			default:
				r.printf("= error: open mode %q is not rdonly or wronly\n", pos[1])
				return
			}
		}
		f, err := r.p.open(mode)
		if err == nil {
			r.files[pos[0]] = f
		}
		r.result(err)
	case "close":
		f, ok := r.file(pos[0])
		if !ok {
			return
		}
		delete(r.files, pos[0])
		r.result(f.close())
	case "reg":
		r.reg(pos, kv)
	case "unreg":
		r.unreg(pos, kv)
	case "del":
		r.del(pos)
	case "writev", "write", "pwrite":
		r.write(st.Verb, pos)
	case "mem":
		off := 0
		if len(pos) > 0 {
			off = r.int(pos[0])
		}
		page := r.p.page()
		if off < 0 || off+8 > len(page) {
			r.printf("= error: offset %d outside the page\n", off)
			return
		}
		r.printf("= %#x\n", binary.LittleEndian.Uint64(page[off:]))
	case "setmem":
		if r.readonly {
			r.printf("= error: the enable page is read-only\n")
			return
		}
		off, v := r.int(pos[0]), r.uint(pos[1])
		page := r.p.page()
		if off < 0 || off+8 > len(page) {
			r.printf("= error: offset %d outside the page\n", off)
			return
		}
		binary.LittleEndian.PutUint64(page[off:], v)
	case "protect":
		var writable bool
		switch pos[0] {
		case "readonly":
		case "readwrite":
			writable = true
		default:
			r.printf("= error: protect readonly|readwrite\n")
			return
		}
		err := r.p.protect(writable)
		if err == nil {
			r.readonly = !writable
		}
		r.result(err)
	case "cat":
		r.cat(pos[0])
	case "echo":
		flag := unix.O_TRUNC
		if pos[0] == ">>" {
			flag = unix.O_APPEND
		}
		n, err := r.p.fs().write(pos[1], flag, []byte(pos[2]))
		if err != nil {
			r.result(err)
			return
		}
		r.printf("= %d\n", n)
	case "trunc":
		_, err := r.p.fs().write(pos[0], unix.O_TRUNC, nil)
		r.result(err)
	case "ls":
		names, err := r.p.fs().readDir(pos[0])
		if err != nil {
			r.result(err)
			return
		}
		slices.Sort(names)
		for _, n := range names {
			r.printf("| %s\n", n)
		}
	case "exists":
		r.printf("= %s\n", yesNo(r.p.fs().exists(pos[0])))
	case "wait-gone":
		if !waitFor(func() bool { return !r.present(pos[0]) }) {
			r.printf("= still there\n")
			return
		}
		r.printf("= gone\n")
	case "wait-count":
		n := 0
		waitFor(func() bool {
			n = len(r.glob(pos[0]))
			return strconv.Itoa(n) == pos[1]
		})
		r.printf("= %d\n", n)
	case "perf":
		r.perf(pos)
	case "child":
		out, err := r.p.child(st.Child)
		for _, line := range strings.SplitAfter(string(out), "\n") {
			if line != "" {
				r.printf("  %s", line)
			}
		}
		if err != nil {
			r.printf("= child: %s\n", errText(err))
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// int and uint parse numbers in any base; a bad one is reported by the
// step's output (the scenario is wrong, and shows it on every backend).
func (r *runner) int(s string) int {
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		r.printf("= error: bad number %q\n", s)
	}
	return int(v)
}

func (r *runner) uint(s string) uint64 {
	if strings.HasPrefix(s, "-") {
		return uint64(r.int(s))
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		r.printf("= error: bad number %q\n", s)
	}
	return v
}

// addr resolves addr=... to an address in the process.
func (r *runner) addr(kv map[string]string) uint64 {
	a, ok := kv["addr"]
	if !ok {
		return r.p.base()
	}
	if v, ok := r.p.special(a); ok {
		return v
	}
	return r.p.base() + r.uint(a)
}

func (r *runner) hex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		r.printf("= error: bad hex %q\n", s)
	}
	return b
}

func (r *runner) reg(pos []string, kv map[string]string) {
	f, ok := r.file(pos[0])
	if !ok {
		return
	}
	raw := make([]byte, abi.UserRegSize)
	size := uint64(abi.UserRegSize)
	if v, ok := kv["regsize"]; ok {
		size = r.uint(v)
	}
	binary.LittleEndian.PutUint32(raw[0:], uint32(size))
	raw[4] = byte(r.uint(or(kv["bit"], "0")))
	raw[5] = byte(r.uint(or(kv["size"], "4")))
	binary.LittleEndian.PutUint16(raw[6:], uint16(r.flags(kv["flags"])))
	binary.LittleEndian.PutUint64(raw[8:], r.addr(kv))
	raw = r.avail(append(raw, r.hex(kv["tail"])...), kv)
	idx, err := f.reg(raw, pos[1], kv["name"] == "fault")
	if err != nil {
		r.result(err)
		return
	}
	r.printf("= 0 index=%d\n", idx)
}

// avail cuts the struct to its first avail=N bytes: only those are
// readable, the memory after them faults.
func (r *runner) avail(raw []byte, kv map[string]string) []byte {
	v, ok := kv["avail"]
	if !ok {
		return raw
	}
	n := r.int(v)
	if n < 0 || n > len(raw) {
		r.printf("= error: avail=%d outside the struct's %d bytes\n", n, len(raw))
		return raw
	}
	return raw[:n]
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (r *runner) flags(s string) uint64 {
	var v uint64
	for _, f := range strings.Split(s, ",") {
		switch f {
		case "":
		case "persist":
			v |= abi.RegPersist
		case "multi":
			v |= abi.RegMultiFormat
		default:
			v |= r.uint(f)
		}
	}
	return v
}

func (r *runner) unreg(pos []string, kv map[string]string) {
	f, ok := r.file(pos[0])
	if !ok {
		return
	}
	raw := make([]byte, abi.UserUnregSize)
	binary.LittleEndian.PutUint32(raw[0:], uint32(r.uint(or(kv["regsize"], "16"))))
	raw[4] = byte(r.uint(or(kv["bit"], "0")))
	raw[5] = byte(r.uint(or(kv["res"], "0")))
	binary.LittleEndian.PutUint16(raw[6:], uint16(r.uint(or(kv["res2"], "0"))))
	binary.LittleEndian.PutUint64(raw[8:], r.addr(kv))
	raw = r.avail(append(raw, r.hex(kv["tail"])...), kv)
	r.status(f.unreg(raw))
}

// status prints "= 0" or the error, for ioctls that return 0.
func (r *runner) status(err error) {
	if err != nil {
		r.result(err)
		return
	}
	r.printf("= 0\n")
}

func (r *runner) del(pos []string) {
	f, ok := r.file(pos[0])
	if !ok {
		return
	}
	name, fault := pos[1], false
	if len(pos) == 2 && name == "fault" {
		fault = true
	}
	var err error
	switch {
	case len(pos) == 3: // retry
		waitFor(func() bool {
			err = f.del(name, fault)
			return !errors.Is(err, unix.EBUSY)
		})
	case len(pos) == 5: // until GLOB N
		waitFor(func() bool {
			err = f.del(name, fault)
			return strconv.Itoa(len(r.glob(pos[3]))) == pos[4]
		})
	default:
		err = f.del(name, fault)
	}
	r.status(err)
}

// waitLimit is how long a step waits for the kernel's deferred teardown
// (spec §3.4: an RCU grace period and a work item after the last reference,
// usually milliseconds) before it prints what it sees. It is generous
// because a loaded machine emulating the VM without KVM has been seen to
// take longer than 2 s; a wait ends as soon as its condition holds, so the
// limit costs nothing when the kernel is quick, and a step prints the same
// text however long it waited.
const waitLimit = 60 * time.Second

// waitFor polls cond until it holds or waitLimit has passed, and says
// whether it held. cond runs at least once, and once more after the
// deadline, so a slow poll never loses the last look.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func (r *runner) iovecs(words []string) []iovec {
	var out []iovec
	for _, w := range words {
		kind, val, _ := strings.Cut(w, ":")
		var b []byte
		switch kind {
		case "u8":
			b = []byte{byte(r.uint(val))}
		case "u16":
			b = binary.LittleEndian.AppendUint16(nil, uint16(r.uint(val)))
		case "u32":
			b = binary.LittleEndian.AppendUint32(nil, uint32(r.uint(val)))
		case "u64":
			b = binary.LittleEndian.AppendUint64(nil, r.uint(val))
		case "hex":
			b = r.hex(val)
		case "str":
			b = []byte(val)
		case "zero":
			b = make([]byte, r.int(val))
		case "fault":
			out = append(out, iovec{fault: r.int(val)})
			continue
		default:
			r.printf("= error: bad iovec %q\n", w)
			continue
		}
		out = append(out, iovec{b: b})
	}
	return out
}

func (r *runner) write(verb string, pos []string) {
	f, ok := r.file(pos[0])
	if !ok {
		return
	}
	var n int
	var err error
	switch verb {
	case "writev":
		n, err = f.writev(r.iovecs(pos[1:]))
	default:
		off, words := int64(0), pos[1:]
		if verb == "pwrite" {
			off, words = int64(r.int(pos[1])), pos[2:]
		}
		var buf []byte
		for _, v := range r.iovecs(words) {
			if v.fault != 0 {
				r.printf("= error: fault: buffers only in writev\n")
				return
			}
			buf = append(buf, v.b...)
		}
		n, err = f.write(buf, off)
	}
	if err != nil {
		r.result(err)
		return
	}
	r.printf("= %d\n", n)
}

// cat prints a file, or every file a glob in its path matches.
func (r *runner) cat(p string) {
	paths := []string{p}
	if strings.ContainsAny(p, "*?[") {
		paths = r.glob(p)
		if len(paths) == 0 {
			r.printf("= no match\n")
			return
		}
	}
	globbed := len(paths) > 1 || paths[0] != p
	for _, p := range paths {
		if globbed {
			r.printf("| == %s\n", p)
		}
		data, err := r.p.fs().read(p)
		if err != nil {
			r.result(err)
			continue
		}
		r.printContent(p, data)
	}
}

// present reports whether path, or any match of it if it is a glob, exists.
func (r *runner) present(p string) bool {
	if strings.ContainsAny(p, "*?[") {
		return len(r.glob(p)) > 0
	}
	return r.p.fs().exists(p)
}

// glob expands a pattern one path element at a time.
func (r *runner) glob(pattern string) []string {
	matches := []string{""}
	for _, elem := range strings.Split(pattern, "/") {
		var next []string
		for _, dir := range matches {
			if !strings.ContainsAny(elem, "*?[") {
				next = append(next, path.Join(dir, elem))
				continue
			}
			names, err := r.p.fs().readDir(or(dir, "."))
			if err != nil {
				continue
			}
			slices.Sort(names)
			for _, n := range names {
				if ok, _ := path.Match(elem, n); ok {
					next = append(next, path.Join(dir, n))
				}
			}
		}
		matches = next
	}
	var out []string
	for _, m := range matches {
		if r.p.fs().exists(m) {
			out = append(out, m)
		}
	}
	return out
}

// printContent prints a file's lines as "| line", marking what
// normalisation rewrites: type IDs and trace record prefixes. A last line
// without a newline ends in "\ (no newline)".
func (r *runner) printContent(p string, data []byte) {
	base := path.Base(p)
	text := string(data)
	noNL := text != "" && !strings.HasSuffix(text, "\n")
	text = strings.TrimSuffix(text, "\n")
	if text == "" && !noNL {
		r.printf("= empty\n")
		return
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case base == "id":
			line = markID(line)
		case base == "format" && strings.HasPrefix(line, "ID: "):
			line = "ID: " + markID(line[len("ID: "):])
		case base == "trace" || base == "trace_pipe":
			line = maskTraceLine(line)
		case base == "error_log":
			line = maskErrorLogLine(line)
		}
		r.printf("| %s\n", line)
	}
	if noNL {
		r.printf("\\ (no newline)\n")
	}
}

func (r *runner) perf(pos []string) {
	switch pos[0] {
	case "open":
		if len(pos) != 3 {
			r.printf("= error: perf open P SYSTEM/NAME\n")
			return
		}
		system, name, ok := strings.Cut(pos[2], "/")
		if !ok {
			r.printf("= error: perf open needs SYSTEM/NAME\n")
			return
		}
		pr, err := r.p.perf(system, name)
		if err == nil {
			if old := r.perfs[pos[1]]; old != nil {
				old.close()
			}
			r.perfs[pos[1]] = pr
		}
		r.result(err)
	case "read":
		pr, ok := r.perfs[pos[1]]
		if !ok {
			r.printf("= error: no perf %s\n", pos[1])
			return
		}
		samples, err := pr.read()
		if err != nil {
			r.result(err)
			return
		}
		if len(samples) == 0 {
			r.printf("= no samples\n")
		}
		for _, s := range samples {
			r.printf("| sample %x\n", s)
		}
	case "close":
		pr, ok := r.perfs[pos[1]]
		if !ok {
			r.printf("= error: no perf %s\n", pos[1])
			return
		}
		delete(r.perfs, pos[1])
		r.result(pr.close())
	case "filter":
		pr, ok := r.perfs[pos[1]]
		if !ok || len(pos) != 3 {
			r.printf("= error: perf filter P \"TEXT\"\n")
			return
		}
		r.result(pr.setFilter(pos[2]))
	default:
		r.printf("= error: perf open|read|filter|close\n")
	}
}
