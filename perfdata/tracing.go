package perfdata

import (
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"unsafe"
)

// HeaderPage is the text of tracefs events/header_page as Linux 6.12 prints
// it on x86-64 with 4 KiB pages (ring_buffer_print_page_header). The "int
// overwrite" line really has the offset of commit: the kernel prints it so.
const HeaderPage = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n" +
	"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n" +
	"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n" +
	"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n"

// HeaderEvent is the text of tracefs events/header_event as Linux 6.12
// prints it (ring_buffer_print_entry_header).
const HeaderEvent = "# compressed entry header\n" +
	"\ttype_len    :    5 bits\n" +
	"\ttime_delta  :   27 bits\n" +
	"\tarray       :   32 bits\n" +
	"\n" +
	"\tpadding     : type == 29\n" +
	"\ttime_extend : type == 30\n" +
	"\ttime_stamp : type == 31\n" +
	"\tdata max type_len  == 28\n"

// TracingData is the HEADER_TRACING_DATA feature: the tracefs text that
// tells perf how tracepoint records are laid out and printed, in the layout
// of tools/perf/util/trace-event-info.c (read by trace-event-read.c).
//
// Every text is kept exactly as tracefs prints it.
type TracingData struct {
	// Version is the layout version; the Writer writes "0.6" when it is
	// empty. From 0.6 on, SavedCmdlines is present.
	Version  string
	LongSize int // sizeof(long) of the kernel; the Writer's default is the machine's
	PageSize int // the Writer's default is os.Getpagesize()

	HeaderPage  []byte // events/header_page; the Writer's default is HeaderPage
	HeaderEvent []byte // events/header_event; the Writer's default is HeaderEvent
	// Ftrace holds the format files of events/ftrace/* (perf writes
	// those of the ftrace events it records, usually none).
	Ftrace [][]byte
	// Systems holds the format files of the recorded tracepoints, by
	// system (events/<system>/<name>/format).
	Systems []TracingSystem
	// Kallsyms is /proc/kallsyms (perf now writes it empty), Printk is
	// printk_formats and SavedCmdlines is saved_cmdlines; each may be
	// empty.
	Kallsyms      []byte
	Printk        []byte
	SavedCmdlines []byte
}

// A TracingSystem is one tracefs event system with the format files of its
// recorded events.
type TracingSystem struct {
	Name    string   // "user_events", "sched", ...
	Formats [][]byte // events/<Name>/<event>/format, each whole
}

// FindFormat returns the format text of the tracepoint whose "ID:" line
// is id, and its system: how a TypeTracepoint attr's Config is resolved.
func (td *TracingData) FindFormat(id uint64) (system string, format []byte, ok bool) {
	for _, s := range td.Systems {
		for _, f := range s.Formats {
			if fid, ok := formatID(f); ok && fid == id {
				return s.Name, f, true
			}
		}
	}
	return "", nil, false
}

// formatID is the number on the "ID:" line of a format text.
func formatID(format []byte) (uint64, bool) {
	_, rest, ok := bytes.Cut(format, []byte("\nID: "))
	if !ok {
		return 0, false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	id, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 10, 64)
	return id, err == nil
}

// FormatName returns the event name of a format text: its "name:" line.
func FormatName(format []byte) string {
	line, _, _ := bytes.Cut(format, []byte("\n"))
	name, ok := bytes.CutPrefix(line, []byte("name: "))
	if !ok {
		return ""
	}
	return string(bytes.TrimSpace(name))
}

// tracingMagic starts the tracing data: "just guessing this is someone's
// birthday.. ;)" (tracing_data_header).
const tracingMagic = "\x17\x08\x44tracing"

// bigEndian is whether this machine is big-endian, as the tracing data's
// endian byte records it.
var bigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// appendTracingData encodes td as perf's tracing_data_get writes it.
func appendTracingData(b []byte, td *TracingData) []byte {
	version := td.Version
	if version == "" {
		version = "0.6"
	}
	longSize := td.LongSize
	if longSize == 0 {
		longSize = int(unsafe.Sizeof(uintptr(0)))
	}
	pageSize := td.PageSize
	if pageSize == 0 {
		pageSize = os.Getpagesize()
	}
	headerPage, headerEvent := td.HeaderPage, td.HeaderEvent
	if len(headerPage) == 0 {
		headerPage = []byte(HeaderPage)
	}
	if len(headerEvent) == 0 {
		headerEvent = []byte(HeaderEvent)
	}
	b = append(b, tracingMagic...)
	b = append(b, version...)
	b = append(b, 0)
	if bigEndian {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = append(b, byte(longSize))
	b = ne.AppendUint32(b, uint32(pageSize))

	b = append(b, "header_page\x00"...)
	b = appendFile8(b, headerPage)
	b = append(b, "header_event\x00"...)
	b = appendFile8(b, headerEvent)

	b = ne.AppendUint32(b, uint32(len(td.Ftrace)))
	for _, f := range td.Ftrace {
		b = appendFile8(b, f)
	}
	b = ne.AppendUint32(b, uint32(len(td.Systems)))
	for _, s := range td.Systems {
		b = append(b, s.Name...)
		b = append(b, 0)
		b = ne.AppendUint32(b, uint32(len(s.Formats)))
		for _, f := range s.Formats {
			b = appendFile8(b, f)
		}
	}
	b = ne.AppendUint32(b, uint32(len(td.Kallsyms)))
	b = append(b, td.Kallsyms...)
	b = ne.AppendUint32(b, uint32(len(td.Printk)))
	b = append(b, td.Printk...)
	if versionAtLeast06(version) {
		b = appendFile8(b, td.SavedCmdlines)
	}
	return b
}

// appendFile8 appends a file as record_file(path, 8) does: u64 size, bytes.
func appendFile8(b []byte, s []byte) []byte {
	b = ne.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// versionAtLeast06 is trace_report's atof(version) >= 0.6: atof reads the
// longest prefix that is a number, here digits with at most one dot.
func versionAtLeast06(v string) bool {
	end, dot := 0, false
	for ; end < len(v); end++ {
		if c := v[end]; c == '.' && !dot {
			dot = true
		} else if c < '0' || c > '9' {
			break
		}
	}
	f, err := strconv.ParseFloat(v[:end], 64)
	return err == nil && f >= 0.6
}

// maxTracingString bounds the strings of tracing data as perf's read_string
// does (BUFSIZ, 8192 bytes with the NUL).
const maxTracingString = 8191

// decodeTracingData decodes a HEADER_TRACING_DATA section, as trace_report
// reads it.
func decodeTracingData(r *featReader) *TracingData {
	td := &TracingData{}
	if m := r.bytes(uint64(len(tracingMagic)), "magic"); m != nil && string(m) != tracingMagic {
		r.err = formatErr(r.off, "feature tracing_data: no \"\\x17\\x08\\x44tracing\" magic")
		return nil
	}
	td.Version = r.cstring("version")
	endian := r.bytes(1, "endian byte")
	long := r.bytes(1, "long size")
	td.PageSize = int(r.u32("page size"))
	if r.err != nil {
		return nil
	}
	if (endian[0] != 0) != bigEndian {
		r.err = formatErr(r.off, "feature tracing_data: recorded on a machine of the other byte order (not supported)")
		return nil
	}
	td.LongSize = int(long[0])

	if p := r.bytes(12, "header_page tag"); p != nil && string(p) != "header_page\x00" {
		r.err = formatErr(r.off+int64(r.pos-12), "feature tracing_data: %q where \"header_page\" should be", p)
		return nil
	}
	td.HeaderPage = r.file8("header_page")
	if p := r.bytes(13, "header_event tag"); p != nil && string(p) != "header_event\x00" {
		r.err = formatErr(r.off+int64(r.pos-13), "feature tracing_data: %q where \"header_event\" should be", p)
		return nil
	}
	td.HeaderEvent = r.file8("header_event")

	n := r.u32("ftrace count")
	td.Ftrace = make([][]byte, 0, r.countLimit(uint64(n), 8))
	for i := uint32(0); i < n && r.err == nil; i++ {
		td.Ftrace = append(td.Ftrace, r.file8("ftrace format"))
	}
	n = r.u32("system count")
	td.Systems = make([]TracingSystem, 0, r.countLimit(uint64(n), 5))
	for i := uint32(0); i < n && r.err == nil; i++ {
		s := TracingSystem{Name: r.cstring("system name")}
		m := r.u32("event count")
		s.Formats = make([][]byte, 0, r.countLimit(uint64(m), 8))
		for j := uint32(0); j < m && r.err == nil; j++ {
			s.Formats = append(s.Formats, r.file8("event format"))
		}
		td.Systems = append(td.Systems, s)
	}
	td.Kallsyms = r.bytes(uint64(r.u32("kallsyms size")), "kallsyms")
	td.Printk = r.bytes(uint64(r.u32("printk_formats size")), "printk_formats")
	if versionAtLeast06(td.Version) {
		td.SavedCmdlines = r.file8("saved_cmdlines")
	}
	if r.err != nil {
		return nil
	}
	return td
}

// file8 reads a u64 size and that many bytes.
func (r *featReader) file8(what string) []byte {
	n := r.u64(what + " size")
	return r.bytes(n, what)
}

// cstring reads a NUL-terminated string (read_string).
func (r *featReader) cstring(what string) string {
	if r.err != nil {
		return ""
	}
	rest := r.b[r.pos:]
	i := bytes.IndexByte(rest, 0)
	switch {
	case i < 0:
		r.fail(what + " (no NUL)")
		return ""
	case i > maxTracingString:
		r.err = formatErr(r.off+int64(r.pos), "feature %s: %s longer than %d bytes", r.f, what, maxTracingString)
		return ""
	}
	r.pos += i + 1
	return string(rest[:i])
}
