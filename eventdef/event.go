package eventdef

import "strings"

// HeaderSize is the size of struct trace_entry, the common header at the
// start of every record: common_type (u16), common_flags (u8),
// common_preempt_count (u8), common_pid (s32). Field offsets count from the
// start of the record, so the first user field is at HeaderSize.
const HeaderSize = 8

// MaxArrayLen is the largest N of a char[N] field (MAX_FIELD_ARRAY_SIZE).
const MaxArrayLen = 1024

// MaxCommandLen is the longest command DIAG_IOCSREG accepts: MAX_EVENT_DESC
// (512) including the terminating NUL. The same limit applies to the name
// given to DIAG_IOCSDEL.
const MaxCommandLen = 511

// Systems of the two kinds of user event.
const (
	System      = "user_events"       // single-format events
	MultiSystem = "user_events_multi" // USER_EVENT_REG_MULTI_FORMAT events, named "<name>.<hexid>"
)

// Kind says how a field's bytes are to be read.
type Kind uint8

const (
	// Integer is s8..s64, u8..u64, char, short, int and their unsigned forms:
	// Size is 1, 2, 4 or 8 and Signed tells the sign.
	Integer Kind = iota + 1
	// Array is char[N] or unsigned char[N]: N bytes in the record, usually a
	// NUL-padded string.
	Array
	// DataLoc is a __data_loc field: a u32 in the record whose low 16 bits are
	// the data's offset from the start of the record and whose high 16 bits
	// are its length.
	DataLoc
	// RelLoc is a __rel_loc field: like DataLoc, but the offset counts from
	// the end of the u32 itself.
	RelLoc
	// Struct is "struct <tag> name size": Size opaque bytes.
	Struct
)

var kindNames = [...]string{Integer: "integer", Array: "array", DataLoc: "__data_loc", RelLoc: "__rel_loc", Struct: "struct"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "Kind(" + itoa(int(k)) + ")"
}

// FilterType is the kernel's enum filter_type, which the kernel derives from
// the type text (filter_assign_type) and which chooses how the generic trace
// printer shows the field. Only the values a user event can get are named.
type FilterType uint8

const (
	FilterOther        FilterType = 0 // FILTER_OTHER: printed by size
	FilterStaticString FilterType = 1 // FILTER_STATIC_STRING: type has '[' and "char"
	FilterDynString    FilterType = 2 // FILTER_DYN_STRING: "__data_loc" and "char"
	FilterRDynString   FilterType = 3 // FILTER_RDYN_STRING: "__rel_loc" and "char"
	FilterCPUMask      FilterType = 6 // FILTER_CPUMASK: "__data_loc" and "cpumask_t"
)

// filterAssignType is filter_assign_type (kernel/trace/trace_events_filter.c)
// restricted to what a user event's type text can be: types never contain a
// space after their prefix, so FILTER_PTR_STRING ("char *") cannot happen.
func filterAssignType(typ string) FilterType {
	if strings.Contains(typ, "__data_loc") {
		if strings.Contains(typ, "char") {
			return FilterDynString
		}
		if strings.Contains(typ, "cpumask_t") {
			return FilterCPUMask
		}
	}
	if strings.Contains(typ, "__rel_loc") && strings.Contains(typ, "char") {
		return FilterRDynString
	}
	if strings.Contains(typ, "[") && strings.Contains(typ, "char") {
		return FilterStaticString
	}
	return FilterOther
}

// Field is one user field of an event.
type Field struct {
	// Type is the type text as the kernel stores it: "u32", "unsigned int",
	// "char[20]", "__rel_loc char[]", "struct my_struct".
	Type string
	// Name is the field name. The kernel does not check it: it may be empty,
	// repeat another field's name or equal a common field's name.
	Name string
	// Offset is the field's offset from the start of the record (so the first
	// field is at HeaderSize). Fields are packed: no alignment, no padding.
	Offset int
	// Size is the field's size in the record: 4 for loc fields.
	Size int
	// Signed is the kernel's is_signed: type[0] != 'u'. So char[N], loc and
	// struct fields are signed.
	Signed bool
	// Kind says how to read the field.
	Kind Kind
	// Filter is the kernel's filter type, which the trace printer follows.
	Filter FilterType
	// CString is set for loc fields whose type contains "char": their data
	// must end in a NUL byte (the kernel's VALIDATOR_ENSURE_NULL).
	CString bool

	show  printClass // how print_fields shows it, decided once at parse time
	label string     // " <name>=", the text print_fields puts before the value
}

// printClass is the branch of print_fields a field takes.
type printClass uint8

const (
	showInvalidSize printClass = iota // FILTER_OTHER of a size other than 1, 2, 4, 8
	showStatic                        // FILTER_STATIC_STRING: %.*s of the field
	showDynString                     // FILTER_DYN_STRING / FILTER_RDYN_STRING
	showByte                          // 1 byte: 'c'(n) or (n)
	showShort                         // 2 bytes: 0x%x (%d)
	showInt                           // 4 bytes: 0x%x (%d)
	showArray                         // 4-byte loc without "char": print_array
	showLong                          // 8 bytes: 0x%llx (%lld)
	showInvalidType                   // any other filter type
)

// printClassOf mirrors the switch in print_fields (kernel/trace/trace_output.c).
func printClassOf(f *Field) printClass {
	switch f.Filter {
	case FilterStaticString:
		return showStatic
	case FilterDynString, FilterRDynString:
		return showDynString
	case FilterOther:
		switch f.Size {
		case 1:
			return showByte
		case 2:
			return showShort
		case 4:
			if strings.Contains(f.Type, "__data_loc") || strings.Contains(f.Type, "__rel_loc") {
				return showArray
			}
			return showInt
		case 8:
			return showLong
		}
		return showInvalidSize
	}
	return showInvalidType
}

// Event is a parsed user event: a name and its fields in declaration order.
// An Event is immutable once parsed; share it freely.
type Event struct {
	// Name is the registered name: the command text before the first space.
	// Multi-format events keep it without their ".<hexid>" suffix.
	Name string
	// Fields in declaration order, with their record layout.
	Fields []Field
	// MinSize is the shortest payload a write must carry: the sum of the
	// field sizes (loc fields count 4). The kernel computes it in int
	// arithmetic; see Parse for events whose sizes overflow it.
	MinSize int

	hasLoc bool // some field has a validator
}

// RecordSize is the size of a record carrying a payload of n bytes.
func RecordSize(n int) int { return HeaderSize + n }

func itoa(n int) string {
	var b [20]byte
	return string(appendInt(b[:0], int64(n)))
}
