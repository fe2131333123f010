package ehprovider_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/eventheader/ehprovider"
	"github.com/uetrace/uetrace/internal/perfring"
	"github.com/uetrace/uetrace/internal/procfs"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

// TestKernelReadBack writes through a provider on the kernel's user_events
// and reads the events back with perf_event_open, as perf record does,
// then decodes them. It runs where the kernel has user_events (the VM of
// kernel/suites' TestEHProviderOnKernel) and skips elsewhere.
func TestKernelReadBack(t *testing.T) {
	f, err := userevents.Open(&userevents.Options{Backend: userevents.Kernel})
	if err != nil {
		t.Skipf("no kernel user_events here: %v", err)
	}
	defer f.Close()
	fs, err := tracefs.Open(&userevents.Options{Backend: userevents.Kernel})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	prov := fmt.Sprintf("KernProv%d", os.Getpid())
	p, err := ehprovider.New(f, prov, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	req := ehprovider.Define3[uint32, string, float64](p, "Request", eventheader.LevelInformation, 0x1, "status", "path", "dur")
	dyn := p.Tracepoint(eventheader.LevelError, 0x10)
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	if req.Enabled() || dyn.Enabled() {
		t.Fatal("enabled before perf attached")
	}
	var rings []*perfring.Ring
	defer func() {
		for _, r := range rings {
			r.Close()
		}
	}()
	cpus, err := procfs.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []*ehprovider.Tracepoint{req.Tracepoint(), dyn} {
		idText, err := fs.ReadFile("events/user_events/" + tp.Name() + "/id")
		if err != nil {
			t.Fatal(err)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(string(idText)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, cpu := range cpus {
			attr := unix.PerfEventAttr{
				Type:        unix.PERF_TYPE_TRACEPOINT,
				Config:      id,
				Sample:      1,
				Sample_type: unix.PERF_SAMPLE_RAW,
				Wakeup:      1,
			}
			fd, err := perfring.Open(&attr, -1, cpu)
			if err != nil {
				t.Fatal(err)
			}
			ring, err := perfring.NewRing(fd, 2)
			if err != nil {
				unix.Close(fd)
				t.Fatal(err)
			}
			rings = append(rings, ring)
		}
	}
	if !req.Enabled() || !dyn.Enabled() {
		t.Fatal("perf_event_open did not enable the tracepoints")
	}
	if err := req.Write(200, "/index.html", 1.5); err != nil {
		t.Fatal(err)
	}
	var b ehprovider.Builder
	b.Reset(dyn, "Failure")
	b.AddInt32("errno", -2, 0)
	if err := dyn.Write(&b); err != nil {
		t.Fatal(err)
	}
	// The kernel delivers a write's sample before the write returns; each
	// ring belongs to one tracepoint, in the order opened.
	var got []string
	for i, r := range rings {
		name := req.Tracepoint().Name()
		if i >= len(cpus) {
			name = dyn.Name()
		}
		r.Read(func(rec []byte) {
			if binary.NativeEndian.Uint32(rec) != unix.PERF_RECORD_SAMPLE {
				return
			}
			n := uint64(binary.NativeEndian.Uint32(rec[8:]))
			if n < 8 || 12+n > uint64(len(rec)) {
				t.Fatalf("sample of %d bytes with %d bytes of raw data", len(rec), n)
			}
			ev, err := eventheader.Decode(name, slices.Clone(rec[20:12+n]))
			if err != nil {
				t.Fatalf("decode %s: %v", name, err)
			}
			js, err := ev.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(js))
		})
	}
	want := []string{
		`{ "n": "` + prov + `:Request", "status": 200, "path": "/index.html", "dur": 1.5, "meta": { "level": 4, "keyword": "0x1" } }`,
		`{ "n": "` + prov + `:Failure", "errno": -2, "meta": { "level": 2, "keyword": "0x10" } }`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("read back from perf:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
