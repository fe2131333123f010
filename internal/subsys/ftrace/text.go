package ftrace

import (
	"encoding/binary"
	"strconv"
)

// The bits of struct trace_entry's flags byte (enum trace_flag_type,
// include/linux/trace_events.h, Linux 6.12).
const (
	FlagIRQsOff        = 0x01 // TRACE_FLAG_IRQS_OFF
	FlagIRQsNoSupport  = 0x02 // TRACE_FLAG_IRQS_NOSUPPORT
	FlagNeedResched    = 0x04 // TRACE_FLAG_NEED_RESCHED
	FlagHardIRQ        = 0x08 // TRACE_FLAG_HARDIRQ
	FlagSoftIRQ        = 0x10 // TRACE_FLAG_SOFTIRQ
	FlagPreemptResched = 0x20 // TRACE_FLAG_PREEMPT_RESCHED
	FlagNMI            = 0x40 // TRACE_FLAG_NMI
	FlagBHOff          = 0x80 // TRACE_FLAG_BH_OFF
)

// TaskCommLen is the kernel's TASK_COMM_LEN: a comm holds at most 15 bytes
// and its NUL.
const TaskCommLen = 16

// AppendHeader appends the header the trace file starts with for the nop
// tracer with the default trace_options (print_trace_header is not used:
// that is the latency format; this is s_show's "# tracer:" lines followed
// by print_func_help_header_irq, kernel/trace/trace.c). entriesInBuffer
// and entriesWritten are what [Ring.Entries] returns; ncpu is the number of
// online CPUs (#P). trace_pipe has no header.
func AppendHeader(dst []byte, entriesInBuffer, entriesWritten uint64, ncpu int) []byte {
	dst = append(dst, "# tracer: nop\n#\n# entries-in-buffer/entries-written: "...)
	dst = strconv.AppendUint(dst, entriesInBuffer, 10)
	dst = append(dst, '/')
	dst = strconv.AppendUint(dst, entriesWritten, 10)
	dst = append(dst, "   #P:"...)
	dst = strconv.AppendInt(dst, int64(ncpu), 10)
	return append(dst, "\n"+
		"#\n"+
		"#                                _-----=> irqs-off/BH-disabled\n"+
		"#                               / _----=> need-resched\n"+
		"#                              | / _---=> hardirq/softirq\n"+
		"#                              || / _--=> preempt-depth\n"+
		"#                              ||| / _-=> migrate-disable\n"+
		"#                              |||| /     delay\n"+
		"#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"+
		"#              | |         |   |||||     |         |\n"...)
}

// Comm returns the name the trace shows for a task, as trace_find_cmdline
// does: "<idle>" for pid 0, "<XXX>" for a negative pid, "<...>" for a
// task whose comm is unknown (the kernel's saved_cmdlines has no entry for
// it: comm ""), else comm cut to TaskCommLen-1 bytes. The kernel's comms
// are never longer (set_task_comm cuts them); a longer Comm is cut the same
// way so that the trace looks as the kernel's would for that task.
func Comm(pid int32, comm string) string {
	switch {
	case pid == 0:
		return "<idle>"
	case pid < 0:
		return "<XXX>"
	case comm == "":
		return "<...>"
	case len(comm) > TaskCommLen-1:
		return comm[:TaskCommLen-1]
	}
	return comm
}

// AppendContext appends the prefix of a trace or trace_pipe line
// (trace_print_context, kernel/trace/trace_output.c, with the default
// options context-info, irq-info and norecord-tgid):
//
//	"%16s-%-7d [%03d] %c%c%c%c%c %5lu.%06lu: "
//
// that is the comm (see [Comm]) right-aligned in 16 columns, '-', the pid
// left-aligned in 7, the CPU in at least 3 digits, the five latency
// characters of [AppendLatFlags] from the record's flags and preempt_count
// bytes, and the time stamp in seconds and microseconds. Wider values widen
// their column, as with printf. The microseconds are rounded to the nearest
// (ns2usecs adds 500 ns before dividing, in 64-bit arithmetic).
func AppendContext(dst []byte, e *Entry) []byte {
	comm := Comm(e.PID, e.Comm)
	for i := len(comm); i < 16; i++ {
		dst = append(dst, ' ')
	}
	dst = append(dst, comm...)
	dst = append(dst, '-')
	n := len(dst)
	dst = strconv.AppendInt(dst, int64(e.PID), 10)
	for i := len(dst) - n; i < 7; i++ {
		dst = append(dst, ' ')
	}
	dst = append(dst, " ["...)
	dst = appendPadded(dst, uint64(e.CPU), 3, '0')
	dst = append(dst, "] "...)
	var flags, preempt byte
	if len(e.Record) >= 4 {
		flags, preempt = e.Record[2], e.Record[3]
	}
	dst = AppendLatFlags(dst, flags, preempt)
	dst = AppendTimestamp(dst, e.TS)
	return append(dst, ": "...)
}

// AppendTimestamp appends " %5lu.%06lu", the time stamp of ns nanoseconds
// as trace_print_time prints it for a clock counting nanoseconds: rounded
// to the nearest microsecond.
func AppendTimestamp(dst []byte, ns uint64) []byte {
	t := (ns + 500) / 1000
	dst = append(dst, ' ')
	dst = appendPadded(dst, t/1000000, 5, ' ')
	dst = append(dst, '.')
	return appendPadded(dst, t%1000000, 6, '0')
}

func appendPadded(dst []byte, v uint64, width int, pad byte) []byte {
	var b [20]byte
	s := strconv.AppendUint(b[:0], v, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, pad)
	}
	return append(dst, s...)
}

// AppendLatFlags appends the five latency characters of a record whose
// common_flags is flags and common_preempt_count is preempt
// (trace_print_lat_fmt):
//
//  1. irqs-off/BH-disabled: 'D' irqs off and BH off, 'd' irqs off,
//     'b' BH off, 'X' irqs-off state not supported, else '.';
//  2. need-resched: 'N' need-resched and preempt-resched, 'n' need-resched,
//     'p' preempt-resched, else '.';
//  3. hardirq/softirq: 'Z' NMI in hardirq, 'z' NMI, 'H' hardirq in
//     softirq, 'h' hardirq, 's' softirq, else '.';
//  4. preempt-depth: the low nibble of preempt in hex, '.' if 0;
//  5. migrate-disable: the high nibble in hex, '.' if 0.
//
// A user_events write records "....." on a kernel without preemption
// counting, as the reference kernel is.
func AppendLatFlags(dst []byte, flags, preempt byte) []byte {
	bh := flags&FlagBHOff != 0
	irqsOff := flags&FlagIRQsOff != 0
	var c1 byte
	switch {
	case irqsOff && bh:
		c1 = 'D'
	case irqsOff:
		c1 = 'd'
	case bh:
		c1 = 'b'
	case flags&FlagIRQsNoSupport != 0:
		c1 = 'X'
	default:
		c1 = '.'
	}
	var c2 byte
	switch flags & (FlagNeedResched | FlagPreemptResched) {
	case FlagNeedResched | FlagPreemptResched:
		c2 = 'N'
	case FlagNeedResched:
		c2 = 'n'
	case FlagPreemptResched:
		c2 = 'p'
	default:
		c2 = '.'
	}
	nmi, hard, soft := flags&FlagNMI != 0, flags&FlagHardIRQ != 0, flags&FlagSoftIRQ != 0
	var c3 byte
	switch {
	case nmi && hard:
		c3 = 'Z'
	case nmi:
		c3 = 'z'
	case hard && soft:
		c3 = 'H'
	case hard:
		c3 = 'h'
	case soft:
		c3 = 's'
	default:
		c3 = '.'
	}
	const hex = "0123456789abcdef"
	c4, c5 := byte('.'), byte('.')
	if preempt&0xf != 0 {
		c4 = hex[preempt&0xf]
	}
	if preempt>>4 != 0 {
		c5 = hex[preempt>>4]
	}
	return append(dst, c1, c2, c3, c4, c5)
}

// AppendLine appends one trace or trace_pipe line for e: the context
// ([AppendContext]), the event ([eventdef.Event.AppendTrace] with
// e.Tracepoint and e.Record) and a newline. With no e.Event it appends
// "Unknown type <common_type>" instead of the event, as print_trace_fmt
// does for a record whose event type is no longer registered.
//
// The kernel builds a line in a trace_seq of 8156 bytes and loses what
// does not fit (trace_pipe prints "[LINE TOO BIG]" instead); AppendLine
// never cuts a line.
func AppendLine(dst []byte, e *Entry) []byte {
	dst = AppendContext(dst, e)
	if e.Event == nil {
		dst = append(dst, "Unknown type "...)
		dst = strconv.AppendUint(dst, uint64(RecordType(e.Record)), 10)
	} else {
		dst = e.Event.AppendTrace(dst, e.Tracepoint, e.Record)
	}
	return append(dst, '\n')
}

// RecordType returns a record's common_type (0 if the record is shorter
// than 2 bytes).
func RecordType(record []byte) uint16 {
	if len(record) < 2 {
		return 0
	}
	return binary.NativeEndian.Uint16(record)
}

// AppendLost appends the line trace and trace_pipe print before an entry
// when events were lost on its CPU (print_trace_line): "CPU:%d [LOST %lu
// EVENTS]" with the count trace_pipe knows, or "CPU:%d [LOST EVENTS]" when
// lost is LostUnknown (the trace file's iterator saw its page overwritten).
func AppendLost(dst []byte, cpu int, lost uint64) []byte {
	dst = append(dst, "CPU:"...)
	dst = strconv.AppendInt(dst, int64(cpu), 10)
	if lost == LostUnknown {
		return append(dst, " [LOST EVENTS]\n"...)
	}
	dst = append(dst, " [LOST "...)
	dst = strconv.AppendUint(dst, lost, 10)
	return append(dst, " EVENTS]\n"...)
}

// LostUnknown is the lost count of an entry before which some events were
// lost, but not a known number of them.
const LostUnknown = ^uint64(0)

// AppendBufferStarted appends the trace file's annotation before the first
// entry of a CPU's buffer (test_cpu_buff_start): "##### CPU %u buffer
// started ####".
func AppendBufferStarted(dst []byte, cpu int) []byte {
	dst = append(dst, "##### CPU "...)
	dst = strconv.AppendInt(dst, int64(cpu), 10)
	return append(dst, " buffer started ####\n"...)
}
