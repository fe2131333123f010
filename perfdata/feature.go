package perfdata

import (
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/procfs"
)

// A Feature is a feature section of a file (HEADER_* in
// tools/perf/util/header.h): a bit in the header's adds_features and a
// section after the data.
type Feature int

// Features.
const (
	FeatureTracingData    Feature = 1
	FeatureBuildID        Feature = 2
	FeatureHostname       Feature = 3
	FeatureOSRelease      Feature = 4
	FeatureVersion        Feature = 5
	FeatureArch           Feature = 6
	FeatureNrCPUs         Feature = 7
	FeatureCPUDesc        Feature = 8
	FeatureCPUID          Feature = 9
	FeatureTotalMem       Feature = 10
	FeatureCmdline        Feature = 11
	FeatureEventDesc      Feature = 12
	FeatureCPUTopology    Feature = 13
	FeatureNUMATopology   Feature = 14
	FeatureBranchStack    Feature = 15
	FeaturePMUMappings    Feature = 16
	FeatureGroupDesc      Feature = 17
	FeatureAuxtrace       Feature = 18
	FeatureStat           Feature = 19
	FeatureCache          Feature = 20
	FeatureSampleTime     Feature = 21
	FeatureMemTopology    Feature = 22
	FeatureClockID        Feature = 23
	FeatureDirFormat      Feature = 24
	FeatureBPFProgInfo    Feature = 25
	FeatureBPFBTF         Feature = 26
	FeatureCompressed     Feature = 27
	FeatureCPUPMUCaps     Feature = 28
	FeatureClockData      Feature = 29
	FeatureHybridTopology Feature = 30
	FeaturePMUCaps        Feature = 31

	featureBits = 256 // HEADER_FEAT_BITS: the size of the bitmap
)

var featureNames = [...]string{
	"reserved", "tracing_data", "build_id", "hostname", "osrelease", "version",
	"arch", "nrcpus", "cpudesc", "cpuid", "total_mem", "cmdline", "event_desc",
	"cpu_topology", "numa_topology", "branch_stack", "pmu_mappings",
	"group_desc", "auxtrace", "stat", "cache", "sample_time", "mem_topology",
	"clockid", "dir_format", "bpf_prog_info", "bpf_btf", "compressed",
	"cpu_pmu_caps", "clock_data", "hybrid_topology", "pmu_caps",
}

// String returns perf's name of the feature (as `perf report --header-only`
// lists missing ones, lower case), or its number.
func (f Feature) String() string {
	if f >= 0 && int(f) < len(featureNames) {
		return featureNames[f]
	}
	return "feature" + strconv.Itoa(int(f))
}

// Meta is what a file says about where it was recorded: the simple
// feature sections that `perf report --header-only` shows. The Writer writes
// the features whose fields are set.
type Meta struct {
	Hostname  string   // HEADER_HOSTNAME: uname nodename
	OSRelease string   // HEADER_OSRELEASE: uname release
	Version   string   // HEADER_VERSION: the version of the recording tool
	Arch      string   // HEADER_ARCH: uname machine
	Cmdline   []string // HEADER_CMDLINE: the recording tool's path, then its arguments
	// HEADER_NRCPUS, written when either is set: the number of CPUs
	// present (perf: the highest present CPU + 1, "nrcpus avail") and
	// online.
	NrCPUsAvail  uint32
	NrCPUsOnline uint32
}

// HostMeta returns the Meta of this machine: uname and the CPUs in
// /sys/devices/system/cpu, with the command line cmdline (perf writes its
// own path, then its arguments); nil cmdline means os.Args with the
// executable's path first. Version is left for the caller. Facts it cannot
// find are left empty.
func HostMeta(cmdline []string) Meta {
	var m Meta
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		m.Hostname = unix.ByteSliceToString(uts.Nodename[:])
		m.OSRelease = unix.ByteSliceToString(uts.Release[:])
		m.Arch = unix.ByteSliceToString(uts.Machine[:])
	}
	// perf's nrcpus avail is the highest present CPU + 1
	// (cpu__max_present_cpu); online is a count.
	present, _ := procfs.PresentCPUs()
	m.NrCPUsAvail = uint32(procfs.MaxCPU(present) + 1)
	online, _ := procfs.OnlineCPUs()
	m.NrCPUsOnline = uint32(len(online))
	if m.NrCPUsOnline == 0 {
		m.NrCPUsOnline = uint32(runtime.NumCPU())
	}
	if m.NrCPUsAvail == 0 {
		m.NrCPUsAvail = m.NrCPUsOnline
	}
	switch {
	case cmdline != nil:
		m.Cmdline = append([]string(nil), cmdline...)
	case len(os.Args) > 0:
		exe, err := os.Executable()
		if err != nil {
			exe = os.Args[0]
		}
		m.Cmdline = append([]string{exe}, os.Args[1:]...)
	}
	return m
}

// nameAlign is NAME_ALIGN: perf pads the strings of features to 64 bytes.
const nameAlign = 64

// appendString appends a feature string as do_write_string does: a u32
// length (the string, its NUL and padding, rounded up to 64) and the bytes.
func appendString(b []byte, s string) []byte {
	n := (len(s) + 1 + nameAlign - 1) &^ (nameAlign - 1)
	b = ne.AppendUint32(b, uint32(n))
	b = append(b, s...)
	for range n - len(s) {
		b = append(b, 0)
	}
	return b
}

// featReader decodes a feature section, remembering where it is for errors.
type featReader struct {
	b   []byte
	off int64 // file offset of b[0]
	pos int
	f   Feature
	err error
}

func (r *featReader) fail(what string) {
	if r.err == nil {
		r.err = truncErr(r.off+int64(r.pos), "feature %s: %s beyond the end of its section (%d bytes)", r.f, what, len(r.b))
	}
}

func (r *featReader) bytes(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.pos) {
		r.fail(what)
		return nil
	}
	p := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return p
}

func (r *featReader) u32(what string) uint32 {
	if p := r.bytes(4, what); p != nil {
		return ne.Uint32(p)
	}
	return 0
}

func (r *featReader) u64(what string) uint64 {
	if p := r.bytes(8, what); p != nil {
		return ne.Uint64(p)
	}
	return 0
}

// string reads a do_write_string string; the padding is cut at the NUL.
func (r *featReader) string(what string) string {
	n := r.u32(what + " length")
	p := r.bytes(uint64(n), what)
	return cstring(p)
}

// cstring is b up to its first NUL.
func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// countLimit bounds a count read from a file by the bytes left for its
// entries of at least minSize bytes each, so a bad count cannot make a huge
// allocation.
func (r *featReader) countLimit(n uint64, minSize int) int {
	left := uint64((len(r.b) - r.pos) / minSize)
	return int(min(n, left))
}

// ClockData is the HEADER_CLOCK_DATA feature, which perf record writes
// when its events use a clock of their own (-k, --clockid): a reading of
// that clock and one of the wall clock, taken one after the other at the
// start of the recording. With it a sample time becomes a wall-clock time
// (perf script -F tod).
type ClockData struct {
	ClockID int32  // the clock of the sample times (the attrs' ClockID), e.g. unix.CLOCK_MONOTONIC
	WallNS  uint64 // gettimeofday, in ns since 1970 (µs precision)
	ClockNS uint64 // clock_gettime(ClockID), in ns
}

// Wall returns the wall-clock time of the sample time t, in ns since
// 1970, as perf script's tod field computes it.
func (c ClockData) Wall(t uint64) int64 {
	return int64(c.WallNS + (t - c.ClockNS))
}
