package eventdef

import (
	"strconv"
	"strings"
)

// commonFields is the common block of every format file (struct trace_entry).
const commonFields = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" +
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" +
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" +
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n"

// AppendFormat appends the text of the tracefs file
// events/<system>/<tracepoint>/format, as the kernel's f_show prints it.
// tracepoint is the event's name in tracefs: Name for a single-format event,
// Name + ".<hexid>" for a multi-format one (see MultiName). id is the event's
// trace event type, shown on the "ID:" line.
//
// Array types (those with '[' that are not __data_loc) print their brackets
// after the name, "char msg[]": f_show would print the field's len there, but
// user_events never sets len, and on kernels that zero new allocations
// (CONFIG_INIT_ON_ALLOC_DEFAULT_ON=y, as Debian's) it is 0, so the brackets are
// empty whatever N is.
func (e *Event) AppendFormat(dst []byte, tracepoint string, id int) []byte {
	dst = append(dst, "name: "...)
	dst = append(dst, tracepoint...)
	dst = append(dst, "\nID: "...)
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, "\nformat:\n"...)
	dst = append(dst, commonFields...)
	dst = append(dst, '\n')
	for i := range e.Fields {
		f := &e.Fields[i]
		dst = append(dst, "\tfield:"...)
		bracket := strings.IndexByte(f.Type, '[')
		if bracket < 0 || strings.HasPrefix(f.Type, "__data_loc") {
			dst = append(dst, f.Type...)
			dst = append(dst, ' ')
			dst = append(dst, f.Name...)
		} else {
			dst = append(dst, f.Type[:bracket]...)
			dst = append(dst, ' ')
			dst = append(dst, f.Name...)
			dst = append(dst, "[]"...)
		}
		dst = append(dst, ";\toffset:"...)
		dst = strconv.AppendUint(dst, uint64(uint32(f.Offset)), 10)
		dst = append(dst, ";\tsize:"...)
		dst = strconv.AppendUint(dst, uint64(uint32(f.Size)), 10)
		dst = append(dst, ";\tsigned:"...)
		if f.Signed {
			dst = append(dst, '1')
		} else {
			dst = append(dst, '0')
		}
		dst = append(dst, ";\n"...)
	}
	dst = append(dst, "\nprint fmt: "...)
	dst = e.appendPrintFmt(dst)
	return append(dst, '\n')
}

// Format returns the text of the event's format file; see AppendFormat.
func (e *Event) Format(tracepoint string, id int) string {
	return string(e.AppendFormat(nil, tracepoint, id))
}

// MultiName is the tracepoint name of a multi-format event: the registered
// name, '.', and the group's multi_id in lowercase hex without padding
// (user_event_set_tp_name).
func MultiName(name string, multiID uint64) string {
	return name + "." + strconv.FormatUint(multiID, 16)
}

// PrintFmt returns the event's print fmt, as user_event_set_print_fmt builds
// it: "name=<fmt>" items joined by spaces in double quotes, then one argument
// per field — __get_str(name) for __data_loc and __get_rel_str(name) for
// __rel_loc types containing "char", REC->name for everything else.
func (e *Event) PrintFmt() string { return string(e.appendPrintFmt(nil)) }

func (e *Event) appendPrintFmt(dst []byte) []byte {
	dst = append(dst, '"')
	for i := range e.Fields {
		f := &e.Fields[i]
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, f.Name...)
		dst = append(dst, '=')
		dst = append(dst, printFormat(f.Type)...)
	}
	dst = append(dst, '"')
	for i := range e.Fields {
		f := &e.Fields[i]
		switch {
		case strings.HasPrefix(f.Type, "__data_loc ") && strings.Contains(f.Type, "char"):
			dst = append(dst, ", __get_str("...)
			dst = append(dst, f.Name...)
			dst = append(dst, ')')
		case strings.HasPrefix(f.Type, "__rel_loc ") && strings.Contains(f.Type, "char"):
			dst = append(dst, ", __get_rel_str("...)
			dst = append(dst, f.Name...)
			dst = append(dst, ')')
		default:
			dst = append(dst, ", REC->"...)
			dst = append(dst, f.Name...)
		}
	}
	return dst
}

// printFormat is user_field_format. Types it does not know, loc types
// without "char[" and structs among them, are printed as 64-bit.
func printFormat(typ string) string {
	switch typ {
	case "s64":
		return "%lld"
	case "u64":
		return "%llu"
	case "s32", "int", "s16", "short", "s8", "char":
		return "%d"
	case "u32", "unsigned int", "u16", "unsigned short", "u8", "unsigned char":
		return "%u"
	}
	if strings.Contains(typ, "char[") {
		return "%s"
	}
	return "%llu"
}

// AppendFields appends the event's field list as dynamic_events shows it
// (user_event_show): "<type> <name>" per field, plus " <size>" for struct
// types, joined by "; ".
func (e *Event) AppendFields(dst []byte) []byte {
	for i := range e.Fields {
		f := &e.Fields[i]
		if i > 0 {
			dst = append(dst, "; "...)
		}
		dst = appendFieldText(dst, f)
	}
	return dst
}

func appendFieldText(dst []byte, f *Field) []byte {
	dst = append(dst, f.Type...)
	dst = append(dst, ' ')
	dst = append(dst, f.Name...)
	if strings.HasPrefix(f.Type, "struct ") {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(f.Size), 10)
	}
	return dst
}

// String returns the event as a command: the name, and if there are fields a
// space and the field list. Parse(e.String()) gives the same event back.
func (e *Event) String() string {
	b := []byte(e.Name)
	if len(e.Fields) > 0 {
		b = append(b, ' ')
		b = e.AppendFields(b)
	}
	return string(b)
}

// DynamicEventsLine is the event's line in tracefs dynamic_events, without
// the newline: "u:" and String(). Multi-format events are listed under their
// registered name, without ".<hexid>".
func (e *Event) DynamicEventsLine() string { return "u:" + e.String() }
