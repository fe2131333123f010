package perfdata

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"

	"golang.org/x/sys/unix"
)

// The byte order of everything in a file: the recording machine's. perfdata
// only handles files of the machine it runs on (see the package doc).
var ne = binary.NativeEndian

// magic is "PERFILE2" read as a native u64: a file written on a machine of
// the other byte order has it swapped (check_magic_endian).
const (
	magic        = 0x32454c4946524550
	magicSwapped = 0x5045524649454c32
	// legacyMagic is "PERFFILE", the version 1 format before 2.6.37.
	legacyMagic = 0x454c494646524550

	headerSize = 104 // struct perf_file_header with adds_features
	// headerSizeNoFeatures is a header of the format before features
	// (offsetof(struct perf_file_header, adds_features)); perf reads it.
	headerSizeNoFeatures = 72
	pipeHeaderSize       = 16 // struct perf_pipe_file_header

	recordHeaderSize = 8      // struct perf_event_header
	maxRecordSize    = 0xffff // perf_event_header.size is a u16
)

// Sizes of struct perf_event_attr (include/uapi/linux/perf_event.h).
const (
	AttrSizeVer0 = 64  // the first published struct
	AttrSizeVer7 = 128 // adds sig_data: the largest perf 6.1 reads
	AttrSizeVer8 = 136 // adds config3
)

// A RecordType is perf_event_header.type. Types below 64 are written by the
// kernel; from 64 on they are perf's own (tools/lib/perf/include/perf/event.h).
type RecordType uint32

// Record types. They are untyped constants so that they compare with a
// RecordType and with the uint32 of a record header in a byte slice.
const (
	RecordMmap            = 1
	RecordLost            = 2
	RecordComm            = 3
	RecordExit            = 4
	RecordThrottle        = 5
	RecordUnthrottle      = 6
	RecordFork            = 7
	RecordRead            = 8
	RecordSample          = 9
	RecordMmap2           = 10
	RecordAux             = 11
	RecordItraceStart     = 12
	RecordLostSamples     = 13
	RecordSwitch          = 14
	RecordSwitchCPUWide   = 15
	RecordNamespaces      = 16
	RecordKsymbol         = 17
	RecordBPFEvent        = 18
	RecordCgroup          = 19
	RecordTextPoke        = 20
	RecordAuxOutputHWID   = 21
	RecordUserTypeStart   = 64 // first type written by perf, not the kernel
	RecordHeaderAttr      = 64
	RecordHeaderEventType = 65
	RecordTracingData     = 66
	RecordBuildID         = 67
	RecordFinishedRound   = 68
	RecordIDIndex         = 69
	RecordAuxtraceInfo    = 70
	RecordAuxtrace        = 71
	RecordAuxtraceError   = 72
	RecordThreadMap       = 73
	RecordCPUMap          = 74
	RecordStatConfig      = 75
	RecordStat            = 76
	RecordStatRound       = 77
	RecordEventUpdate     = 78
	RecordTimeConv        = 79
	RecordHeaderFeature   = 80
	RecordCompressed      = 81
	RecordFinishedInit    = 82
)

var recordNames = [...]string{
	RecordMmap: "MMAP", RecordLost: "LOST", RecordComm: "COMM", RecordExit: "EXIT",
	RecordThrottle: "THROTTLE", RecordUnthrottle: "UNTHROTTLE", RecordFork: "FORK",
	RecordRead: "READ", RecordSample: "SAMPLE", RecordMmap2: "MMAP2", RecordAux: "AUX",
	RecordItraceStart: "ITRACE_START", RecordLostSamples: "LOST_SAMPLES",
	RecordSwitch: "SWITCH", RecordSwitchCPUWide: "SWITCH_CPU_WIDE",
	RecordNamespaces: "NAMESPACES", RecordKsymbol: "KSYMBOL", RecordBPFEvent: "BPF_EVENT",
	RecordCgroup: "CGROUP", RecordTextPoke: "TEXT_POKE", RecordAuxOutputHWID: "AUX_OUTPUT_HW_ID",
	RecordHeaderAttr: "ATTR", RecordHeaderEventType: "EVENT_TYPE",
	RecordTracingData: "TRACING_DATA", RecordBuildID: "BUILD_ID",
	RecordFinishedRound: "FINISHED_ROUND", RecordIDIndex: "ID_INDEX",
	RecordAuxtraceInfo: "AUXTRACE_INFO", RecordAuxtrace: "AUXTRACE",
	RecordAuxtraceError: "AUXTRACE_ERROR", RecordThreadMap: "THREAD_MAP",
	RecordCPUMap: "CPU_MAP", RecordStatConfig: "STAT_CONFIG", RecordStat: "STAT",
	RecordStatRound: "STAT_ROUND", RecordEventUpdate: "EVENT_UPDATE",
	RecordTimeConv: "TIME_CONV", RecordHeaderFeature: "FEATURE",
	RecordCompressed: "COMPRESSED", RecordFinishedInit: "FINISHED_INIT",
}

// String returns the name perf prints after PERF_RECORD_, or the number.
func (t RecordType) String() string {
	if int(t) < len(recordNames) && recordNames[t] != "" {
		return recordNames[t]
	}
	return "RecordType(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// Bits of perf_event_attr.sample_type: which fields a sample has, in the
// order of this list (a sample stores them in the order of the enum in
// perf_event.h, except that IDENTIFIER comes first).
const (
	SampleIP           = 1 << 0
	SampleTID          = 1 << 1
	SampleTime         = 1 << 2
	SampleAddr         = 1 << 3
	SampleRead         = 1 << 4
	SampleCallchain    = 1 << 5
	SampleID           = 1 << 6
	SampleCPU          = 1 << 7
	SamplePeriod       = 1 << 8
	SampleStreamID     = 1 << 9
	SampleRaw          = 1 << 10
	SampleBranchStack  = 1 << 11
	SampleRegsUser     = 1 << 12
	SampleStackUser    = 1 << 13
	SampleWeight       = 1 << 14
	SampleDataSrc      = 1 << 15
	SampleIdentifier   = 1 << 16
	SampleTransaction  = 1 << 17
	SampleRegsIntr     = 1 << 18
	SamplePhysAddr     = 1 << 19
	SampleAux          = 1 << 20
	SampleCgroup       = 1 << 21
	SampleDataPage     = 1 << 22
	SampleCodePage     = 1 << 23
	SampleWeightStruct = 1 << 24
)

// Bits of perf_event_attr.read_format.
const (
	FormatTotalTimeEnabled = 1 << 0
	FormatTotalTimeRunning = 1 << 1
	FormatID               = 1 << 2
	FormatGroup            = 1 << 3
	FormatLost             = 1 << 4
)

// Bits of the flags word of perf_event_attr (Attr.Flags): the bitfield that
// starts with disabled. Those not listed here can be set by number.
const (
	AttrDisabled      = 1 << 0  // the event starts off
	AttrInherit       = 1 << 1  // children inherit it
	AttrPinned        = 1 << 2  // must always be on the PMU
	AttrExclusive     = 1 << 3  // only group on the PMU
	AttrExcludeUser   = 1 << 4  // don't count user
	AttrExcludeKernel = 1 << 5  // don't count kernel
	AttrExcludeHV     = 1 << 6  // don't count hypervisor
	AttrExcludeIdle   = 1 << 7  // don't count when idle
	AttrMmap          = 1 << 8  // MMAP records
	AttrComm          = 1 << 9  // COMM records
	AttrFreq          = 1 << 10 // SamplePeriod is a frequency
	AttrInheritStat   = 1 << 11 // per task counts
	AttrEnableOnExec  = 1 << 12 // the next exec enables
	AttrTask          = 1 << 13 // FORK and EXIT records
	AttrWatermark     = 1 << 14 // Wakeup is wakeup_watermark, in bytes
	AttrPreciseIP     = 3 << 15 // two bits: skid constraint
	AttrMmapData      = 1 << 17 // MMAP records of non-exec mappings
	AttrSampleIDAll   = 1 << 18 // non-sample kernel records carry a sample_id trailer
	AttrExcludeHost   = 1 << 19
	AttrExcludeGuest  = 1 << 20
	AttrMmap2         = 1 << 23 // MMAP2 records instead of MMAP
	AttrCommExec      = 1 << 24 // COMM records due to exec have MiscCommExec
	AttrUseClockID    = 1 << 25 // times are of ClockID
	AttrContextSwitch = 1 << 26 // SWITCH records
	AttrKsymbol       = 1 << 29
	AttrBPFEvent      = 1 << 30
	AttrCgroup        = 1 << 32
	AttrTextPoke      = 1 << 33
)

// Values of perf_event_attr.type (Attr.Type).
const (
	TypeHardware   = 0
	TypeSoftware   = 1
	TypeTracepoint = 2 // Config is the tracefs event id
	TypeHWCache    = 3
	TypeRaw        = 4
	TypeBreakpoint = 5
)

// Bits of perf_event_header.misc.
const (
	MiscCPUModeMask = 7 << 0
	MiscKernel      = 1 << 0
	MiscUser        = 2 << 0
	MiscHypervisor  = 3 << 0
	MiscCommExec    = 1 << 13 // on COMM: the name changed by exec
)

// An Attr is one event of a file: its struct perf_event_attr, its name and
// the sample ids the kernel gave its instances (one per CPU or thread).
//
// The fields are those of perf_event_attr in order. Size is the size of
// the struct as read from a file; the Writer ignores it.
type Attr struct {
	Name string   // "system:name" for a tracepoint; HEADER_EVENT_DESC
	IDs  []uint64 // the sample ids of the event's instances

	Type             uint32
	Size             uint32
	Config           uint64 // for a tracepoint, its id in tracefs
	SamplePeriod     uint64 // or the frequency, with AttrFreq
	SampleType       uint64 // Sample* bits
	ReadFormat       uint64 // Format* bits
	Flags            uint64 // Attr* bits
	Wakeup           uint32 // wakeup_events, or wakeup_watermark with AttrWatermark
	BPType           uint32
	Config1          uint64 // bp_addr, kprobe_func, uprobe_path
	Config2          uint64 // bp_len, kprobe_addr, probe_offset
	BranchSampleType uint64
	SampleRegsUser   uint64
	SampleStackUser  uint32
	ClockID          int32
	SampleRegsIntr   uint64
	AuxWatermark     uint32
	SampleMaxStack   uint16
	AuxSampleSize    uint32
	AuxAction        uint32
	SigData          uint64
	Config3          uint64
}

// encodedSize is the size the Writer gives the attr: VER7 unless Config3
// needs VER8 (perf 6.1 refuses an attr larger than it knows).
func (a *Attr) encodedSize() int {
	if a.Config3 != 0 {
		return AttrSizeVer8
	}
	return AttrSizeVer7
}

// AppendAttr appends the struct perf_event_attr of a, size bytes long (at
// most AttrSizeVer8), its size field size.
func AppendAttr(b []byte, a *Attr, size int) []byte { return appendAttr(b, a, size) }

func appendAttr(b []byte, a *Attr, size int) []byte {
	var s [AttrSizeVer8]byte
	ne.PutUint32(s[0:], a.Type)
	ne.PutUint32(s[4:], uint32(size))
	ne.PutUint64(s[8:], a.Config)
	ne.PutUint64(s[16:], a.SamplePeriod)
	ne.PutUint64(s[24:], a.SampleType)
	ne.PutUint64(s[32:], a.ReadFormat)
	ne.PutUint64(s[40:], a.Flags)
	ne.PutUint32(s[48:], a.Wakeup)
	ne.PutUint32(s[52:], a.BPType)
	ne.PutUint64(s[56:], a.Config1)
	ne.PutUint64(s[64:], a.Config2)
	ne.PutUint64(s[72:], a.BranchSampleType)
	ne.PutUint64(s[80:], a.SampleRegsUser)
	ne.PutUint32(s[88:], a.SampleStackUser)
	ne.PutUint32(s[92:], uint32(a.ClockID))
	ne.PutUint64(s[96:], a.SampleRegsIntr)
	ne.PutUint32(s[104:], a.AuxWatermark)
	ne.PutUint16(s[108:], a.SampleMaxStack)
	ne.PutUint32(s[112:], a.AuxSampleSize)
	ne.PutUint32(s[116:], a.AuxAction)
	ne.PutUint64(s[120:], a.SigData)
	ne.PutUint64(s[128:], a.Config3)
	return append(b, s[:size]...)
}

// DecodeAttr decodes a struct perf_event_attr of any size: fields beyond b
// are zero and bytes beyond the fields known here are ignored, as perf
// reads an older or a newer struct (the kernel's copy_struct_from_user
// refuses non-zero ones: its caller checks them).
func DecodeAttr(b []byte) Attr { return decodeAttr(b) }

func decodeAttr(b []byte) Attr {
	var s [AttrSizeVer8]byte
	copy(s[:], b)
	return Attr{
		Type:             ne.Uint32(s[0:]),
		Size:             ne.Uint32(s[4:]),
		Config:           ne.Uint64(s[8:]),
		SamplePeriod:     ne.Uint64(s[16:]),
		SampleType:       ne.Uint64(s[24:]),
		ReadFormat:       ne.Uint64(s[32:]),
		Flags:            ne.Uint64(s[40:]),
		Wakeup:           ne.Uint32(s[48:]),
		BPType:           ne.Uint32(s[52:]),
		Config1:          ne.Uint64(s[56:]),
		Config2:          ne.Uint64(s[64:]),
		BranchSampleType: ne.Uint64(s[72:]),
		SampleRegsUser:   ne.Uint64(s[80:]),
		SampleStackUser:  ne.Uint32(s[88:]),
		ClockID:          int32(ne.Uint32(s[92:])),
		SampleRegsIntr:   ne.Uint64(s[96:]),
		AuxWatermark:     ne.Uint32(s[104:]),
		SampleMaxStack:   ne.Uint16(s[108:]),
		AuxSampleSize:    ne.Uint32(s[112:]),
		AuxAction:        ne.Uint32(s[116:]),
		SigData:          ne.Uint64(s[120:]),
		Config3:          ne.Uint64(s[128:]),
	}
}

// idPos is where a sample's id is, in u64s from the start of the sample
// (__evsel__calc_id_pos), or -1 if samples have no id.
func idPos(sampleType uint64) int {
	if sampleType&SampleIdentifier != 0 {
		return 0
	}
	if sampleType&SampleID == 0 {
		return -1
	}
	n := 0
	for _, bit := range [...]uint64{SampleIP, SampleTID, SampleTime, SampleAddr} {
		if sampleType&bit != 0 {
			n++
		}
	}
	return n
}

// isPos is where the id of a sample_id trailer is, in u64s back from the
// end of the record (__evsel__calc_is_pos), or -1 if it has none.
func isPos(sampleType uint64) int {
	if sampleType&SampleIdentifier != 0 {
		return 1
	}
	if sampleType&SampleID == 0 {
		return -1
	}
	n := 1
	if sampleType&SampleCPU != 0 {
		n++
	}
	if sampleType&SampleStreamID != 0 {
		n++
	}
	return n
}

// trailerBits are the sample_type bits that go into a sample_id trailer.
const trailerBits = SampleTID | SampleTime | SampleID | SampleStreamID | SampleCPU | SampleIdentifier

// fixedBits are the sample fields of one u64 each before READ.
const fixedBits = SampleIdentifier | SampleIP | SampleTID | SampleTime | SampleAddr |
	SampleID | SampleStreamID | SampleCPU | SamplePeriod

// writableBits are the sample_type bits Writer.WriteSample encodes.
const writableBits = fixedBits | SampleRaw

// u64s is the number of set bits of sampleType in mask: the size, in u64s,
// of those fields.
func u64s(sampleType, mask uint64) int {
	n := 0
	for v := sampleType & mask; v != 0; v &= v - 1 {
		n++
	}
	return n
}

// sampleBitNames names the sample_type bits, as perf evlist -v prints them.
var sampleBitNames = [...]string{
	"IP", "TID", "TIME", "ADDR", "READ", "CALLCHAIN", "ID", "CPU", "PERIOD",
	"STREAM_ID", "RAW", "BRANCH_STACK", "REGS_USER", "STACK_USER", "WEIGHT",
	"DATA_SRC", "IDENTIFIER", "TRANSACTION", "REGS_INTR", "PHYS_ADDR", "AUX",
	"CGROUP", "DATA_PAGE_SIZE", "CODE_PAGE_SIZE", "WEIGHT_STRUCT",
}

// sampleTypeString is "IP|TID|..." for the bits of t.
func sampleTypeString(t uint64) string {
	var s []byte
	for i := 0; i < 64; i++ {
		if t&(1<<i) == 0 {
			continue
		}
		if len(s) > 0 {
			s = append(s, '|')
		}
		if i < len(sampleBitNames) {
			s = append(s, sampleBitNames[i]...)
		} else {
			s = append(s, "bit"...)
			s = strconv.AppendInt(s, int64(i), 10)
		}
	}
	return string(s)
}

// A FormatError says what is wrong with a file and where. It wraps
// unix.EINVAL, or io.ErrUnexpectedEOF when the file ends too soon.
type FormatError struct {
	Offset int64  // file offset of the bad part
	What   string // what is wrong, in words
	Err    error  // unix.EINVAL or io.ErrUnexpectedEOF
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("perf.data: offset %d (%#x): %s", e.Offset, e.Offset, e.What)
}

func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(off int64, format string, args ...any) error {
	return &FormatError{Offset: off, What: fmt.Sprintf(format, args...), Err: unix.EINVAL}
}

func truncErr(off int64, format string, args ...any) error {
	return &FormatError{Offset: off, What: fmt.Sprintf(format, args...), Err: io.ErrUnexpectedEOF}
}
