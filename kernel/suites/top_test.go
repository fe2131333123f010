package suites_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/uetrace/uetrace/kernel/vmtest"
)

// TestTopBPFOnKernel runs uetrace top inside the 6.12 kernel twice over
// the same writes — once counting in the kernel with BPF, once through
// perf's rings (--perf) — and requires the same counts of the event, per
// event and per process, and that the first said it counted by BPF.
func TestTopBPFOnKernel(t *testing.T) {
	vmtest.Require(t)
	uetrace := filepath.Join(t.TempDir(), "uetrace")
	if err := vmtest.Build("./cmd/uetrace", uetrace); err != nil {
		t.Fatal(err)
	}
	// One producer holds the event; a run of top counts 40 records that
	// 40 emits write once it is attached (emit writes only while
	// something listens: it says so, and the script waits for it).
	const script = `
./uetrace --backend kernel register --hold 'top_ev u32 n' >/dev/null 2>&1 &
holder=$!
for i in $(seq 50); do [ -e /sys/kernel/tracing/events/user_events/top_ev ] && break; sleep 0.1; done
count() {
	./uetrace --backend kernel top $1 -e top_ev -d 200ms > /tmp/top.out 2>&1 &
	top=$!
	# Attached: its first block names the event.
	for i in $(seq 300); do grep -q "^event user_events:top_ev" /tmp/top.out && break; sleep 0.1; done
	for i in $(seq 40); do ./uetrace --backend kernel emit 'top_ev u32 n' --field n=$i 2>/dev/null; done
	# Counted: a block shows all 40 (or, failing, the last one tells).
	for i in $(seq 300); do grep -q "^event user_events:top_ev .* events=40 " /tmp/top.out && break; sleep 0.1; done
	kill -INT $top
	wait $top
	echo "== top $1"
	cat /tmp/top.out
}
count ""
count --perf
kill $holder
`
	ctx, cancel := vmtest.TestContext(t)
	defer cancel()
	res, err := vmtest.Run(ctx, vmtest.Options{Files: map[string]string{"uetrace": uetrace}}, "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	t.Logf("VM run: %v, exit %d", res.Elapsed.Round(time.Millisecond), res.ExitCode)
	bpf, perf, ok := strings.Cut(out, "== top --perf")
	if !ok || !strings.Contains(bpf, "== top \n") {
		t.Fatalf("no output of the two runs:\n%s", out)
	}
	last := func(s, re string) string {
		m := regexp.MustCompile(re).FindAllStringSubmatch(s, -1)
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1][1]
	}
	for _, c := range []struct{ what, re string }{
		{"the event's count", `(?m)^event user_events:top_ev .* events=(\d+)`},
		{"the total", `(?m)^top .* events=(\d+)`},
	} {
		b, p := last(bpf, c.re), last(perf, c.re)
		if b == "" || b != p || b != "40" {
			t.Errorf("%s: %q by BPF, %q through perf; want 40 both:\n%s", c.what, b, p, out)
		}
	}
	// BPF loses nothing per event, so it shows no per-event lost count;
	// perf's rings count theirs.
	if strings.Contains(bpf, "BPF counting unavailable") || !strings.Contains(bpf, " events=40 lost=-") || !strings.Contains(perf, " events=40 lost=0") {
		t.Errorf("the first run did not count by BPF, or the second not through perf:\n%s", out)
	}
}
