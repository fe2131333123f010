package tracefilter

import (
	"encoding/binary"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// Options are what a filter depends on beyond its text and event.
type Options struct {
	// NrCPUs is the kernel's nr_cpu_ids: CPUS{...} lists may not name a CPU
	// at or past it, "N" in them is the last one, and a CPU number read
	// from a field at or past it is in no list. 0 means runtime.NumCPU().
	NrCPUs int
	// Kallsyms resolves the kernel functions of ".function" terms; nil
	// finds none, so every such term is refused with "Function not found".
	Kallsyms Kallsyms
}

// Kallsyms is the kernel's symbol table as ".function" terms use it
// (kallsyms_lookup_name, kallsyms_lookup_size_offset).
type Kallsyms interface {
	// Lookup returns the address of the function named name, 0 if none.
	Lookup(name string) uint64
	// Function returns the start and size of the function addr is in.
	Function(addr uint64) (start, size uint64, ok bool)
}

func (o Options) nrCPUs() int {
	if o.NrCPUs > 0 {
		return o.NrCPUs
	}
	return runtime.NumCPU()
}

// Filter is a compiled filter: immutable, safe for concurrent use.
type Filter struct {
	text   string
	prog   []progEntry
	preds  []pred
	nrCPUs int
}

// String is the filter's text as the kernel keeps it.
func (f *Filter) String() string { return f.text }

// Env is what a record's filter reads besides the record: the CPU it is
// written on (the CPU, cpu and common_cpu pseudo-fields) and the writing
// task's comm (COMM, comm).
type Env struct {
	CPU  int
	Comm string
}

var noEnv Env

// Compile parses filter as the kernel does for event ev (create_filter):
// the text is taken as it is (no white space is stripped, and "0" is not
// special: see Set for what a filter file does). On error it returns an
// *Error with the kernel's errno, code and position.
func Compile(ev *eventdef.Event, filter string, opts Options) (*Filter, error) {
	if i := strings.IndexByte(filter, 0); i >= 0 {
		filter = filter[:i]
	}
	p := parser{ev: ev, nrCPUs: opts.nrCPUs(), syms: opts.Kallsyms}
	parens, npreds, ret, errPos := calcStack(filter)
	if ret < 0 {
		switch ret {
		case rESRCH:
			p.parseError(ErrMissingQuote, errPos)
		case rENOENT:
			p.parseError(ErrTooManyOpen, errPos)
		default:
			p.parseError(ErrTooManyClose, errPos)
		}
		return nil, p.err(filter, ret)
	}
	if npreds == 0 {
		return nil, p.err(filter, rEINVAL)
	}
	prog, ret := p.predicateParse(filter, parens, npreds)
	if ret < 0 {
		return nil, p.err(filter, ret)
	}
	return &Filter{text: filter, prog: prog, preds: p.preds, nrCPUs: p.nrCPUs}, nil
}

func (p *parser) err(filter string, ret int) *Error {
	return &Error{Errno: unix.Errno(-ret), Code: p.lasterr, Pos: p.pos, Filter: filter}
}

// Match reports whether the record passes the filter (filter_match_preds).
// record is the whole record, common header (eventdef.HeaderSize bytes)
// first, in the machine's byte order; env is its writer (nil: CPU 0 and an
// empty comm). A nil Filter passes everything. Match does not allocate.
func (f *Filter) Match(record []byte, env *Env) bool {
	if f == nil {
		return true
	}
	if env == nil {
		env = &noEnv
	}
	prog := f.prog
	i := 0
	for ; prog[i].pred >= 0; i++ {
		if f.eval(&f.preds[prog[i].pred], record, env) == prog[i].when {
			i = prog[i].target
		}
	}
	return prog[i].target != 0
}

// readUint reads size bytes at off; bytes past the record read as 0.
func readUint(rec []byte, off, size int) uint64 {
	if off >= 0 && off+size <= len(rec) {
		b := rec[off : off+size]
		switch size {
		case 1:
			return uint64(b[0])
		case 2:
			return uint64(binary.NativeEndian.Uint16(b))
		case 4:
			return uint64(binary.NativeEndian.Uint32(b))
		default:
			return binary.NativeEndian.Uint64(b)
		}
	}
	var v [8]byte
	for k := 0; k < size; k++ {
		v[k] = bat(rec, off+k)
	}
	switch size {
	case 1:
		return uint64(v[0])
	case 2:
		return uint64(binary.NativeEndian.Uint16(v[:]))
	case 4:
		return uint64(binary.NativeEndian.Uint32(v[:]))
	default:
		return binary.NativeEndian.Uint64(v[:])
	}
}

func signExtend(v uint64, size int) int64 {
	sh := 64 - 8*uint(size)
	return int64(v<<sh) >> sh
}

func truncate(v uint64, size int) uint64 {
	if size >= 8 {
		return v
	}
	return v & (1<<(8*uint(size)) - 1)
}

// tail is rec from off on, or nil when off is past it.
func tail(rec []byte, off int) []byte {
	if off < 0 || off > len(rec) {
		return nil
	}
	return rec[off:]
}

func (f *Filter) eval(p *pred, rec []byte, env *Env) bool {
	switch p.fn {
	case fnEq:
		return (p.val == readUint(rec, p.offset, p.size)) != p.not
	case fnCmp:
		v := readUint(rec, p.offset, p.size)
		switch p.op {
		case opBAND:
			return v&p.val != 0
		case opLT:
			if p.signed {
				return signExtend(v, p.size) < int64(p.val2)
			}
			return v < p.val
		case opLE:
			if p.signed {
				return signExtend(v, p.size) <= int64(p.val2)
			}
			return v <= p.val
		case opGT:
			if p.signed {
				return signExtend(v, p.size) > int64(p.val2)
			}
			return v > p.val
		case opGE:
			if p.signed {
				return signExtend(v, p.size) >= int64(p.val2)
			}
			return v >= p.val
		}
		return false
	case fnString:
		return p.re.match(tail(rec, p.offset), p.size) != p.not
	case fnStrLoc:
		item := readUint(rec, p.offset, 4)
		return p.re.match(tail(rec, int(item&0xffff)), int(item>>16)) != p.not
	case fnStrRelLoc:
		item := readUint(rec, p.offset, 4)
		return p.re.match(tail(rec, p.offset+4+int(item&0xffff)), int(item>>16)) != p.not
	case fnComm:
		var comm [TaskCommLen]byte
		copy(comm[:TaskCommLen-1], env.Comm)
		return p.re.match(comm[:], TaskCommLen) != p.not
	case fnCPU:
		cpu, cmp := int32(env.CPU), int32(p.val)
		switch p.op {
		case opEQ:
			return cpu == cmp
		case opNE:
			return cpu != cmp
		case opLT:
			return cpu < cmp
		case opLE:
			return cpu <= cmp
		case opGT:
			return cpu > cmp
		case opGE:
			return cpu >= cmp
		}
		return false
	case fnFunction:
		v := readUint(rec, p.offset, 8)
		in := v >= p.val && v < p.val2
		return in == (p.op == opEQ)
	case fnCPUCPUMask:
		return scalarCPUMask(p.op, uint64(uint32(env.CPU)), p.mask)
	case fnScalarCPUMask:
		cpu := uint64(uint32(readUint(rec, p.offset, p.size)))
		if cpu >= uint64(f.nrCPUs) {
			return false
		}
		return scalarCPUMask(p.op, cpu, p.mask)
	case fnCPUMask:
		loc := int(readUint(rec, p.offset, 4) & 0xffff)
		switch p.op {
		case opEQ, opNE:
			eq := true
			for c := 0; c < f.nrCPUs; c++ {
				if recBit(rec, loc, c) != maskTest(p.mask, uint64(c)) {
					eq = false
					break
				}
			}
			return eq == (p.op == opEQ)
		case opBAND:
			for c := 0; c < f.nrCPUs; c++ {
				if recBit(rec, loc, c) && maskTest(p.mask, uint64(c)) {
					return true
				}
			}
		}
		return false
	case fnCPUMaskCPU:
		loc := int(readUint(rec, p.offset, 4) & 0xffff)
		cpu := int(uint32(p.val))
		has := cpu < f.nrCPUs && recBit(rec, loc, cpu)
		switch p.op {
		case opEQ:
			return has && !recHasOther(rec, loc, cpu, f.nrCPUs)
		case opNE:
			return !has || recHasOther(rec, loc, cpu, f.nrCPUs)
		case opBAND:
			return has
		}
		return false
	}
	return false
}

// scalarCPUMask is do_filter_scalar_cpumask: the mask has two CPUs or
// more, so no single CPU equals it.
func scalarCPUMask(o op, cpu uint64, mask []uint64) bool {
	switch o {
	case opEQ:
		return false
	case opNE:
		return true
	case opBAND:
		return maskTest(mask, cpu)
	}
	return false
}

// recBit is bit cpu of the cpumask at rec[loc:] (longs of 64 bits, in the
// machine's byte order: on little-endian, byte cpu/8, bit cpu%8).
func recBit(rec []byte, loc, cpu int) bool {
	w := readUint(rec, loc+cpu/64*8, 8)
	return w&(1<<(uint(cpu)%64)) != 0
}

// recHasOther is cpumask_nth(1, mask) < nr_cpu_ids: whether the mask
// has a second CPU.
func recHasOther(rec []byte, loc, _, nr int) bool {
	n := 0
	for c := 0; c < nr; c++ {
		if recBit(rec, loc, c) {
			if n++; n >= 2 {
				return true
			}
		}
	}
	return false
}

// CompilePerf is what PERF_EVENT_IOC_SET_FILTER does with its string
// (perf_event_set_filter, ftrace_profile_set_filter): the string, up to
// its NUL, must be shorter than PageSize (strndup_user), else EINVAL;
// then it is compiled as it is — no white space is stripped and "0" is a
// term like any other (so it is refused: there is no field "0"). Nothing
// is written to error_log. The kernel also refuses with EEXIST a second
// filter on one perf event; that is the caller's to check.
func CompilePerf(ev *eventdef.Event, arg string, opts Options) (*Filter, error) {
	if i := strings.IndexByte(arg, 0); i >= 0 {
		arg = arg[:i]
	}
	if len(arg)+1 > PageSize {
		return nil, unix.EINVAL
	}
	return Compile(ev, arg, opts)
}
