package tracefilter

import (
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// Limits of the kernel's filters.
const (
	// MaxStrVal is MAX_FILTER_STR_VAL: a quoted string must be shorter.
	MaxStrVal = 256
	// MaxNumLen is sizeof(num_buf) in parse_pred: a number's text must be
	// shorter.
	MaxNumLen = 24
	// PageSize bounds a write to a filter file: the kernel refuses a write
	// of PageSize bytes or more with EINVAL.
	PageSize = 4096
	// TaskCommLen is TASK_COMM_LEN, the length the comm field is matched in.
	TaskCommLen = 16
)

type op uint8

// The kernel's OPS, in its order: '<=' must come before '<' and '>='
// before '>' as the parser takes the first that matches.
const (
	opGlob op = iota
	opNE
	opEQ
	opLE
	opLT
	opGE
	opGT
	opBAND
)

var opText = [...]string{"~", "!=", "==", "<=", "<", ">=", ">", "&"}

type ftype uint8

const (
	ftOther ftype = iota
	ftStaticString
	ftDynString
	ftRDynString
	ftCPUMask
	ftComm
	ftCPU
	ftStacktrace
)

func (t ftype) isString() bool {
	switch t {
	case ftStaticString, ftDynString, ftRDynString, ftComm:
		return true
	}
	return false
}

type field struct {
	name   string
	offset int
	size   int
	signed bool
	typ    ftype
}

// generic and common are the kernel's ftrace_generic_fields and
// ftrace_common_fields (kernel/trace/trace_events.c), searched after the
// event's own fields.
var generic = []field{
	{name: "CPU", signed: true, typ: ftCPU},
	{name: "cpu", signed: true, typ: ftCPU},
	{name: "common_cpu", signed: true, typ: ftCPU},
	{name: "COMM", typ: ftComm},
	{name: "comm", typ: ftComm},
	{name: "stacktrace", typ: ftStacktrace},
	{name: "STACKTRACE", typ: ftStacktrace},
}

var common = []field{
	{name: "common_type", offset: 0, size: 2},
	{name: "common_flags", offset: 2, size: 1},
	{name: "common_preempt_count", offset: 3, size: 1},
	{name: "common_pid", offset: 4, size: 4, signed: true},
}

func fromEventdef(f *eventdef.Field) field {
	t := ftOther
	switch f.Filter {
	case eventdef.FilterStaticString:
		t = ftStaticString
	case eventdef.FilterDynString:
		t = ftDynString
	case eventdef.FilterRDynString:
		t = ftRDynString
	case eventdef.FilterCPUMask:
		t = ftCPUMask
	}
	return field{name: f.Name, offset: f.Offset, size: f.Size, signed: f.Signed, typ: t}
}

// findField is trace_find_event_field. user_events adds its fields at the
// head of the list, so of two fields with one name the last declared wins.
func findField(ev *eventdef.Event, name string) (field, bool) {
	if ev != nil {
		for i := len(ev.Fields) - 1; i >= 0; i-- {
			if ev.Fields[i].Name == name {
				return fromEventdef(&ev.Fields[i]), true
			}
		}
	}
	for _, f := range generic {
		if f.name == name {
			return f, true
		}
	}
	for _, f := range common {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}

type fn uint8

const (
	fnNop fn = iota
	fnEq
	fnCmp
	fnScalarCPUMask
	fnComm
	fnString
	fnStrLoc
	fnStrRelLoc
	fnCPU
	fnCPUCPUMask
	fnCPUMask
	fnCPUMaskCPU
	fnFunction
)

type pred struct {
	fn     fn
	op     op
	not    bool
	signed bool
	size   int
	offset int
	val    uint64
	val2   uint64
	re     regex
	mask   []uint64
}

type progEntry struct {
	target int
	when   bool
	pred   int // index in preds; -1 for TRUE/FALSE
}

// parser holds one parse's state, as struct filter_parse_error and the
// trace_event_call do in the kernel.
type parser struct {
	ev      *eventdef.Event
	nrCPUs  int
	syms    Kallsyms
	lasterr Code
	pos     int
	preds   []pred
}

func (p *parser) parseError(code Code, pos int) {
	p.lasterr = code
	p.pos = pos
}

// Negative errnos as the kernel returns them: parse functions return
// either an index or one of these.
const (
	rEPERM  = -1
	rENOENT = -2
	rESRCH  = -3
	rEINVAL = -int(unix.EINVAL)
	rENOMEM = -int(unix.ENOMEM)
)

// parsePred is parse_pred: str[start:] is a term, pos is the kernel's
// (one past start). It returns the length consumed, or a negative errno.
func (p *parser) parsePred(str string, start, pos int) int {
	s0 := str[start:]
	c := func(i int) byte { return at(s0, i) }
	i := 0
	for isSpace(c(i)) {
		i++
	}
	s := i
	for isAlnum(c(i)) || c(i) == '_' {
		i++
	}
	if i == s {
		return rEPERM
	}
	fld, ok := findField(p.ev, s0[s:i])
	if !ok {
		p.parseError(ErrFieldNotFound, pos+i)
		return rEINVAL
	}
	if hasPrefixAt(s0, i, ".ustring") {
		i += len(".ustring")
	}
	function := false
	if hasPrefixAt(s0, i, ".function") {
		function = true
		i += len(".function")
	}
	for isSpace(c(i)) {
		i++
	}
	o := -1
	for k, t := range opText {
		if hasPrefixAt(s0, i, t) {
			o = k
			break
		}
	}
	if o < 0 {
		p.parseError(ErrInvalidOp, pos+i)
		return rEINVAL
	}
	i += len(opText[o])
	for isSpace(c(i)) {
		i++
	}
	s = i
	pr := pred{op: op(o), offset: fld.offset}

	switch {
	case function:
		if fld.size != 8 {
			p.parseError(ErrIllegalFieldOp, pos+i)
			return rEINVAL
		}
		if pr.op != opNE && pr.op != opEQ {
			p.parseError(ErrInvalidOp, pos+i)
			return rEINVAL
		}
		var ip uint64
		if isDigit(c(i)) {
			for isAlnum(c(i)) {
				i++
			}
			if i-s >= MaxNumLen {
				p.parseError(ErrOperandTooLong, pos+i)
				return rEINVAL
			}
			var errno unix.Errno
			if ip, errno = kstrtoull(s0[s:i]); errno != 0 {
				p.parseError(ErrInvalidValue, pos+i)
				return rEINVAL
			}
		} else {
			s = i
			for c(i) != 0 && !isSpace(c(i)) {
				i++
			}
			if p.syms != nil {
				ip = p.syms.Lookup(s0[s:i])
			}
			if ip == 0 {
				p.parseError(ErrNoFunction, pos+i)
				return rEINVAL
			}
		}
		var start, size uint64
		ok := false
		if p.syms != nil {
			start, size, ok = p.syms.Function(ip)
		}
		if !ok {
			p.parseError(ErrNoFunction, pos+i)
			return rEINVAL
		}
		pr.fn = fnFunction
		pr.val = start
		pr.val2 = start + size

	case hasPrefixAt(s0, i, "CPUS"):
		switch fld.typ {
		case ftCPUMask, ftCPU, ftOther:
		default:
			p.parseError(ErrIllegalFieldOp, pos+i)
			return rEINVAL
		}
		switch pr.op {
		case opEQ, opNE, opBAND:
		default:
			p.parseError(ErrIllegalFieldOp, pos+i)
			return rEINVAL
		}
		i += 4
		b := c(i)
		i++
		if b != '{' {
			p.parseError(ErrMissingBraceOpen, pos+i)
			return rEINVAL
		}
		maskstart := i
		for c(i) != 0 && c(i) != '}' {
			i++
		}
		if c(i) != '}' {
			p.parseError(ErrMissingBraceClose, pos+i)
			return rEINVAL
		}
		if maskstart == i {
			p.parseError(ErrInvalidCPUList, pos+i)
			return rEINVAL
		}
		mask, errno := parseCPUList(s0[maskstart:i], p.nrCPUs)
		if errno != 0 {
			p.parseError(ErrInvalidCPUList, pos+i)
			return rEINVAL
		}
		i++
		w, first := maskWeight(mask)
		single := w == 1
		if single {
			pr.val = uint64(first)
		} else {
			pr.mask = mask
		}
		switch {
		case fld.typ == ftCPUMask:
			if single {
				pr.fn = fnCPUMaskCPU
			} else {
				pr.fn = fnCPUMask
			}
		case fld.typ == ftCPU:
			if single {
				if pr.op == opBAND {
					pr.op = opEQ
				}
				pr.fn = fnCPU
			} else {
				pr.fn = fnCPUCPUMask
			}
		case single:
			if pr.op == opBAND {
				pr.op = opEQ
			}
			p.selectComparison(&pr, fld.size, false)
			if pr.op == opNE {
				pr.not = true
			}
		default:
			switch fld.size {
			case 1, 2, 4, 8:
				pr.fn = fnScalarCPUMask
				pr.size = fld.size
			}
		}

	case c(i) == '\'' || c(i) == '"':
		q := c(i)
		switch pr.op {
		case opNE:
			pr.not = true
		case opGlob, opEQ:
		default:
			p.parseError(ErrIllegalFieldOp, pos+i)
			return rEINVAL
		}
		if !fld.typ.isString() {
			p.parseError(ErrExpectDigit, pos+i)
			return rEINVAL
		}
		for i++; c(i) != 0; i++ {
			if c(i) == q {
				break
			}
		}
		if c(i) == 0 {
			p.parseError(ErrMissingQuote, pos+i)
			return rEINVAL
		}
		s++
		if i-s >= MaxStrVal {
			p.parseError(ErrOperandTooLong, pos+i)
			return rEINVAL
		}
		pat := s0[s:i]
		if pr.op == opGlob {
			var not bool
			pr.re, not = parseRegex(pat)
			pr.not = not
		} else {
			pr.re = regex{pattern: pat, typ: matchFull}
		}
		switch fld.typ {
		case ftComm:
			pr.fn = fnComm
		case ftStaticString:
			pr.fn = fnString
			pr.size = fld.size
		case ftDynString:
			pr.fn = fnStrLoc
		case ftRDynString:
			pr.fn = fnStrRelLoc
		}
		i++

	case isDigit(c(i)) || c(i) == '-':
		if fld.typ.isString() {
			p.parseError(ErrExpectString, pos+i)
			return rEINVAL
		}
		if pr.op == opGlob {
			p.parseError(ErrIllegalFieldOp, pos+i)
			return rEINVAL
		}
		if c(i) == '-' {
			i++
		}
		for isAlnum(c(i)) {
			i++
		}
		if i-s >= MaxNumLen {
			p.parseError(ErrOperandTooLong, pos+i)
			return rEINVAL
		}
		var errno unix.Errno
		if fld.signed {
			var v int64
			v, errno = kstrtoll(s0[s:i])
			pr.val = uint64(v)
		} else {
			pr.val, errno = kstrtoull(s0[s:i])
		}
		if errno != 0 {
			p.parseError(ErrIllegalIntval, pos+s)
			return rEINVAL
		}
		if fld.typ == ftCPU {
			pr.fn = fnCPU
		} else {
			p.selectComparison(&pr, fld.size, fld.signed)
			if pr.op == opNE {
				pr.not = true
			}
		}

	default:
		p.parseError(ErrInvalidValue, pos+i)
		return rEINVAL
	}
	p.preds = append(p.preds, pr)
	return i
}

// selectComparison is select_comparison_fn: fields of other sizes (structs,
// the size-0 stacktrace) get no function, and their terms are never true.
func (p *parser) selectComparison(pr *pred, size int, signed bool) {
	switch size {
	case 1, 2, 4, 8:
	default:
		pr.fn = fnNop
		return
	}
	pr.size = size
	// The kernel casts the value to the field's type; the comparison then
	// needs it truncated (unsigned) or sign-extended from the field's size
	// (signed, kept in val2).
	pr.val = truncate(pr.val, size)
	pr.val2 = uint64(signExtend(pr.val, size))
	if pr.op == opEQ || pr.op == opNE {
		pr.fn = fnEq
		return
	}
	pr.fn = fnCmp
	pr.signed = signed
}

func hasPrefixAt(s string, i int, prefix string) bool {
	return i <= len(s) && len(s)-i >= len(prefix) && s[i:i+len(prefix)] == prefix
}

// calcStack is calc_stack: the first scan, which counts terms and the
// depth of parentheses and finds unbalanced ones and unclosed quotes.
func calcStack(str string) (parens, preds int, ret int, errPos int) {
	isPred := false
	open, maxOpen := 1, 1
	var quote byte
	lastQuote := 0
	i := 0
	for ; i < len(str); i++ {
		ch := str[i]
		if isSpace(ch) {
			continue
		}
		if quote != 0 {
			if ch == quote {
				quote = 0
			}
			continue
		}
		switch ch {
		case '\'', '"':
			quote = ch
			lastQuote = i
		case '|', '&':
			if at(str, i+1) != ch {
				break
			}
			isPred = false
			continue
		case '(':
			isPred = false
			open++
			if open > maxOpen {
				maxOpen = open
			}
			continue
		case ')':
			isPred = false
			if open == 1 {
				return 0, 0, rEPERM, i
			}
			open--
			continue
		}
		if !isPred {
			preds++
			isPred = true
		}
	}
	if quote != 0 {
		return 0, 0, rESRCH, lastQuote
	}
	if open != 1 {
		level := open
		for i--; i > 0; i-- {
			if quote != 0 {
				if str[i] == quote {
					quote = 0
				}
				continue
			}
			switch str[i] {
			case '(':
				if level == open {
					return 0, 0, rENOENT, i
				}
				level--
			case ')':
				level++
			case '\'', '"':
				quote = str[i]
			}
		}
		return 0, 0, rENOENT, 0
	}
	return maxOpen, preds, 0, 0
}

const (
	flagInvert     = 1
	flagProcessAnd = 2
	flagProcessOr  = 4
)

// predicateParse is predicate_parse: the first pass builds the branch
// program; the second and third shorten jumps and fold the inversions.
func (p *parser) predicateParse(str string, nrParens, nrPreds int) ([]progEntry, int) {
	opStack := make([]int, nrParens)
	prog := make([]progEntry, nrPreds+2)
	inverts := make([]bool, nrPreds+2)
	top := 0
	invert := false
	ret := rENOMEM
	n := 0
	ptr := 0

	// update is update_preds. A target of -1 (the "previous entry" of the
	// first) is never followed by the kernel's programs; bad reports it
	// rather than read before the array as C would.
	bad := false
	update := func(N int, inv bool) {
		t := prog[N].target
		if t < 0 {
			bad = true
			return
		}
		s := prog[t].target
		prog[t].when = inv
		prog[t].target = N
		prog[N].target = s
	}

	for at(str, ptr) != 0 {
		next := ptr
		ptr++
		ch := str[next]
		if isSpace(ch) {
			continue
		}
		switch ch {
		case '(':
			if top >= nrParens-1 {
				return nil, rEINVAL
			}
			top++
			opStack[top] = b2i(invert)
			continue
		case '!':
			if nc := at(str, next+1); nc != '=' && nc != '~' {
				invert = !invert
				continue
			}
		}
		if n >= nrPreds {
			p.parseError(ErrTooManyPreds, next)
			return nil, ret
		}
		inverts[n] = invert
		prog[n].target = n - 1
		prog[n].pred = len(p.preds)
		l := p.parsePred(str, next, ptr)
		if l < 0 {
			return nil, l
		}
		ptr = next + l
		n++

		ret = rEPERM
		for {
			next = ptr
			ptr++
			ch := at(str, next)
			if isSpace(ch) {
				continue
			}
			switch ch {
			case ')', 0:
			case '&', '|':
				if at(str, next+1) == ch {
					ptr++
					break
				}
				p.parseError(ErrTooManyPreds, next)
				return nil, ret
			default:
				p.parseError(ErrTooManyPreds, next)
				return nil, ret
			}
			invert = opStack[top]&flagInvert != 0
			if opStack[top]&flagProcessAnd != 0 {
				update(n-1, invert)
				opStack[top] &^= flagProcessAnd
			}
			if ch == '&' {
				opStack[top] |= flagProcessAnd
				break
			}
			if opStack[top]&flagProcessOr != 0 {
				update(n-1, !invert)
				opStack[top] &^= flagProcessOr
			}
			if ch == '|' {
				opStack[top] |= flagProcessOr
				break
			}
			if ch == 0 {
				goto out
			}
			if top == 0 {
				p.parseError(ErrTooManyClose, ptr)
				return nil, rEPERM
			}
			top--
		}
	}
	if n != 0 {
		p.parseError(ErrInvalidFilter, ptr)
		return nil, rEINVAL
	}
out:
	if bad {
		return nil, rEINVAL
	}
	if top != 0 {
		p.parseError(ErrTooManyOpen, ptr)
		return nil, ret
	}
	if n == 0 {
		p.parseError(ErrNoFilter, ptr)
		return nil, rEINVAL
	}
	prog[n] = progEntry{target: 1, pred: -1}
	prog[n+1] = progEntry{target: 0, pred: -1}
	prog[n-1].target = n
	prog[n-1].when = false
	for i := n - 1; i > 0; {
		i--
		t := prog[i].target
		if t < 0 || t >= len(prog) {
			return nil, rEINVAL
		}
		if prog[i].when == prog[t].when {
			prog[i].target = prog[t].target
		}
	}
	for i := 0; i < n; i++ {
		prog[i].when = inverts[i] != prog[i].when
		if prog[i].target <= i {
			return nil, rEINVAL
		}
	}
	return prog[:n+2], 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
