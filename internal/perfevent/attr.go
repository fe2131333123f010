package perfevent

import (
	"fmt"
	"math/bits"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/perfdata"
)

// The ABI's limits (include/uapi/linux/perf_event.h, 6.12).
const (
	// PERF_SAMPLE_MAX and PERF_FORMAT_MAX: the first bit that is not one.
	sampleMax = 1 << 25
	formatMax = 1 << 5
	// flags bits from __reserved_1 on (after sigtrap, bit 37).
	flagsReserved = uint64(1<<64-1) &^ (1<<38 - 1)

	// perf_event_open(2)'s flags.
	FlagFDNoGroup = 1 << 0 // PERF_FLAG_FD_NO_GROUP
	FlagFDOutput  = 1 << 1 // PERF_FLAG_FD_OUTPUT
	FlagPIDCgroup = 1 << 2 // PERF_FLAG_PID_CGROUP
	FlagFDCloexec = 1 << 3 // PERF_FLAG_FD_CLOEXEC
	flagAll       = FlagFDNoGroup | FlagFDOutput | FlagPIDCgroup | FlagFDCloexec

	// The attr's flags uetrace does not know perfdata by name.
	attrWriteBackward = 1 << 27
	attrNamespaces    = 1 << 28
	attrAuxOutput     = 1 << 31
	attrBuildID       = 1 << 34
	attrInheritThread = 1 << 35
	attrRemoveOnExec  = 1 << 36
	attrSigtrap       = 1 << 37

	// MinAttrSize (VER0) and MaxAttrSize (PAGE_SIZE) bound the attr the
	// kernel copies; out of them is E2BIG, and the kernel writes AttrSize,
	// its own struct's, back into the caller's attr.size.
	MinAttrSize = perfdata.AttrSizeVer0
	MaxAttrSize = 4096
	AttrSize    = perfdata.AttrSizeVer8
)

// supportedSample are the sample fields uetrace fills for one of its
// tracepoints exactly as Linux does: the identifier and ids, the writer's
// process, thread, CPU and time, the period, the raw record, and IP and
// ADDR, which for a user_events tracepoint are 0 here (see the package
// doc).
const supportedSample = perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime |
	perfdata.SampleAddr | perfdata.SampleID | perfdata.SampleStreamID | perfdata.SampleCPU |
	perfdata.SamplePeriod | perfdata.SampleRaw

// unsupportedFlags are attr flags that ask for what uetrace cannot give:
// writing the ring backwards, signals, frequency sampling, and changes at
// exec other than enabling.
const unsupportedFlags = perfdata.AttrFreq | attrWriteBackward | attrSigtrap | attrRemoveOnExec | attrAuxOutput

// Check validates an attr of one of uetrace's tracepoints as
// perf_event_open(2) would, in the kernel's order (perf_copy_attr, then
// the call's own checks), and then what uetrace cannot do. raw is the
// caller's struct as copied: attr.size bytes (0 meaning VER0), at most
// MaxAttrSize. Errors wrap the errno perf_event_open returns: E2BIG for a
// size out of range or non-zero bytes past the struct uetrace knows,
// EINVAL for reserved bits, unknown sample or read bits, bad flags or
// cpu, and EOPNOTSUPP, with the reason, for what Linux does and uetrace
// does not (Unsupported).
func Check(raw []byte, pid, cpu, flags int, ncpu int) (perfdata.Attr, error) {
	if flags&^flagAll != 0 {
		return perfdata.Attr{}, fmt.Errorf("perf_event_open: flags %#x: %w", flags, unix.EINVAL)
	}
	if len(raw) < perfdata.AttrSizeVer0 || len(raw) > MaxAttrSize {
		return perfdata.Attr{}, fmt.Errorf("perf_event_open: attr of %d bytes (the kernel takes %d to %d): %w", len(raw), perfdata.AttrSizeVer0, MaxAttrSize, unix.E2BIG)
	}
	// copy_struct_from_user: what this kernel's struct does not have must
	// be zero.
	for _, c := range raw[min(len(raw), perfdata.AttrSizeVer8):] {
		if c != 0 {
			return perfdata.Attr{}, fmt.Errorf("perf_event_open: attr has non-zero bytes past the %d this kernel knows: %w", perfdata.AttrSizeVer8, unix.E2BIG)
		}
	}
	a := perfdata.DecodeAttr(raw)
	a.Size = uint32(len(raw))
	var tail [perfdata.AttrSizeVer8]byte
	copy(tail[:], raw)
	reserved2 := uint16(tail[110]) | uint16(tail[111])<<8
	switch {
	case a.Flags&flagsReserved != 0 || reserved2 != 0 || a.AuxAction != 0:
		return a, fmt.Errorf("perf_event_open: reserved attr bits set: %w", unix.EINVAL)
	case a.SampleType&^(sampleMax-1) != 0:
		return a, fmt.Errorf("perf_event_open: sample_type %#x has unknown bits: %w", a.SampleType, unix.EINVAL)
	case a.ReadFormat&^(formatMax-1) != 0:
		return a, fmt.Errorf("perf_event_open: read_format %#x has unknown bits: %w", a.ReadFormat, unix.EINVAL)
	case a.SampleType&perfdata.SampleWeight != 0 && a.SampleType&perfdata.SampleWeightStruct != 0:
		return a, fmt.Errorf("perf_event_open: sample_type has both WEIGHT and WEIGHT_STRUCT: %w", unix.EINVAL)
	case a.Flags&attrInheritThread != 0 && a.Flags&perfdata.AttrInherit == 0:
		return a, fmt.Errorf("perf_event_open: inherit_thread without inherit: %w", unix.EINVAL)
	case a.Flags&perfdata.AttrFreq == 0 && a.SamplePeriod&(1<<63) != 0:
		return a, fmt.Errorf("perf_event_open: sample_period %#x: %w", a.SamplePeriod, unix.EINVAL)
	case pid == -1 && cpu == -1:
		return a, fmt.Errorf("perf_event_open: pid -1 and cpu -1 (every task on every CPU): %w", unix.EINVAL)
	case cpu < -1 || cpu >= ncpu:
		return a, fmt.Errorf("perf_event_open: cpu %d (this machine has %d): %w", cpu, ncpu, unix.EINVAL)
	case a.Type != perfdata.TypeTracepoint:
		return a, fmt.Errorf("perf_event_open: type %d is not a tracepoint: %w", a.Type, unix.EINVAL)
	case a.Flags&perfdata.AttrUseClockID != 0 && !knownClock(a.ClockID):
		// perf_event_set_clock: the clocks perf events may use.
		return a, fmt.Errorf("perf_event_open: clockid %d: %w", a.ClockID, unix.EINVAL)
	}
	if why := Unsupported(&a, flags); why != "" {
		return a, fmt.Errorf("perf_event_open: %s: %w", why, unix.EOPNOTSUPP)
	}
	return a, nil
}

// knownClock reports whether perf events may use clock id c
// (perf_event_set_clock): MONOTONIC, MONOTONIC_RAW, REALTIME, BOOTTIME, TAI.
func knownClock(c int32) bool {
	switch c {
	case unix.CLOCK_MONOTONIC, unix.CLOCK_MONOTONIC_RAW, unix.CLOCK_REALTIME, unix.CLOCK_BOOTTIME, unix.CLOCK_TAI:
		return true
	}
	return false
}

// Unsupported says what of a uetrace cannot give, or "" when nothing:
// sample fields it has no source for (call chains, registers, user stacks,
// the counter read with each sample...), frequency sampling, a backward
// ring, signals, remove-on-exec, branch stacks, groups and cgroups.
func Unsupported(a *perfdata.Attr, flags int) string {
	var why []string
	if st := a.SampleType &^ supportedSample; st != 0 {
		why = append(why, "sample_type "+sampleNames(st)+" (uetrace fills "+sampleNames(supportedSample)+")")
	}
	if f := a.Flags & unsupportedFlags; f != 0 {
		var names []string
		for _, n := range []struct {
			bit  uint64
			name string
		}{{perfdata.AttrFreq, "freq"}, {attrWriteBackward, "write_backward"}, {attrSigtrap, "sigtrap"}, {attrRemoveOnExec, "remove_on_exec"}, {attrAuxOutput, "aux_output"}} {
			if f&n.bit != 0 {
				names = append(names, n.name)
			}
		}
		why = append(why, "attr "+strings.Join(names, ", "))
	}
	if flags&FlagPIDCgroup != 0 {
		why = append(why, "PERF_FLAG_PID_CGROUP (cgroup events)")
	}
	if flags&FlagFDOutput != 0 {
		why = append(why, "PERF_FLAG_FD_OUTPUT")
	}
	return strings.Join(why, "; ")
}

// sampleNames names sample_type bits as perf does (IP|TID|...).
func sampleNames(st uint64) string {
	names := [...]string{"IP", "TID", "TIME", "ADDR", "READ", "CALLCHAIN", "ID", "CPU", "PERIOD", "STREAM_ID", "RAW",
		"BRANCH_STACK", "REGS_USER", "STACK_USER", "WEIGHT", "DATA_SRC", "IDENTIFIER", "TRANSACTION", "REGS_INTR",
		"PHYS_ADDR", "AUX", "CGROUP", "DATA_PAGE_SIZE", "CODE_PAGE_SIZE", "WEIGHT_STRUCT"}
	var out []string
	for v := st; v != 0; v &= v - 1 {
		i := bits.TrailingZeros64(v)
		if i < len(names) {
			out = append(out, names[i])
		} else {
			out = append(out, fmt.Sprintf("bit %d", i))
		}
	}
	return strings.Join(out, "|")
}
