package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/inproc"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/userevents"
)

// The demo's events: what a small web service might emit.
var demoEvents = []string{
	"demo_http_request u32 status; u64 duration_ns; __rel_loc char[] path",
	"demo_cache_lookup u8 hit; __rel_loc char[] key",
	"demo_gc u32 cycle; u64 heap_bytes",
}

func newDemoCmd() *cobra.Command {
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "See user_events work end to end, in this process: no root, no daemon, no kernel support",
		Long: `demo runs the user_events subsystem inside uetrace, starts a producer that
registers three events through the userevents package and writes them while
they are enabled, enables them, prints the live trace for a few seconds and
then the status — the same steps and output as "uetrace enable", "uetrace
trace -f" and "uetrace status" on a kernel or a daemon.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptible(cmd)
			defer stop()
			return runDemo(ctx, cmd.OutOrStdout(), duration)
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 3*time.Second, "how long to trace")
	return cmd
}

func runDemo(ctx context.Context, out io.Writer, duration time.Duration) error {
	k := inproc.New(subsys.New(subsys.Options{NumCPU: runtime.NumCPU()}))
	fs := k.Tracefs()
	f, err := userevents.Open(k.Options())
	if err != nil {
		return err
	}
	defer f.Close()

	fmt.Fprintf(out, "uetrace demo: the user_events subsystem, running inside this process.\n\n")
	fmt.Fprintf(out, "# A producer registers its events (DIAG_IOCSREG) through the userevents package:\n")
	evs := make([]*userevents.Event, len(demoEvents))
	for i, c := range demoEvents {
		if evs[i], err = f.Register(c, 0); err != nil {
			return err
		}
		fmt.Fprintf(out, "  %-70s write index %d\n", c, evs[i].WriteIndex())
	}
	prodCtx, stopProducer := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	var written, skipped int
	go func() {
		defer wg.Done()
		written, skipped = produce(prodCtx, evs)
	}()
	defer func() { stopProducer(); wg.Wait() }()

	time.Sleep(500 * time.Millisecond) // a few rounds of the producer finding nothing enabled
	fmt.Fprintf(out, "\n# Nothing is attached: Enabled() is false, so the producer builds no payload and writes nothing.\n$ uetrace status\n")
	if err := printStatus(out, fs); err != nil {
		return err
	}

	fmt.Fprintf(out, "\n$ uetrace enable 'user_events:demo_*'\n")
	evNames, err := matchEvents(fs, "enable", "user_events:demo_*", io.Discard)
	if err != nil {
		return err
	}
	for _, ev := range evNames {
		if err := fs.WriteFile("events/"+ev+"/enable", []byte("1"), 0); err != nil {
			return err
		}
		fmt.Fprintf(out, "enabled %s\n", strings.Replace(ev, "/", ":", 1))
	}

	fmt.Fprintf(out, "\n# The enable bits are set; the producer now writes. The live trace for %v:\n$ uetrace trace -f\n", duration)
	pipe, err := fs.Open("trace_pipe", os.O_RDONLY)
	if err != nil {
		return err
	}
	traceCtx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	if err := copyUntil(traceCtx, out, pipe); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil
	}

	fmt.Fprintf(out, "\n$ uetrace status\n")
	if err := printStatus(out, fs); err != nil {
		return err
	}
	stopProducer()
	wg.Wait()
	format, err := fs.ReadFile("events/user_events/demo_http_request/format")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n$ uetrace cat events/user_events/demo_http_request/format\n%s", format)
	fmt.Fprintf(out, "\nThe producer wrote %d records and skipped %d checks while nothing was attached.\n", written, skipped)
	fmt.Fprintf(out, "Next: `uetrace serve` gives every program on this machine the same, and `uetrace emit`, `uetrace trace -f`\nand `uetrace status` work against it (or against the kernel, where it has user_events).\n")
	return nil
}

// produce plays a small web service: requests, cache lookups and now and
// then a garbage collection, each written only while its event is enabled.
func produce(ctx context.Context, evs []*userevents.Event) (written, skipped int) {
	paths := []string{"/", "/index.html", "/api/users", "/api/orders/42", "/static/app.js", "/healthz"}
	statuses := []uint64{200, 200, 200, 200, 304, 404, 500}
	var enc eventdef.Encoder
	buf := make([]byte, 0, 256)
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	cycle := uint64(0)
	write := func(ev *userevents.Event, fill func(*eventdef.Encoder)) {
		if !ev.Enabled() {
			skipped++
			return
		}
		if err := ev.Encode(&enc, buf[:0], fill); err == nil {
			written++
		}
	}
	for {
		select {
		case <-ctx.Done():
			return written, skipped
		case <-tick.C:
		}
		path := paths[rand.IntN(len(paths))]
		write(evs[1], func(e *eventdef.Encoder) {
			e.Uint(uint64(rand.IntN(2)))
			e.String("page:" + path)
		})
		write(evs[0], func(e *eventdef.Encoder) {
			e.Uint(statuses[rand.IntN(len(statuses))])
			e.Uint(uint64(50_000 + rand.IntN(2_000_000)))
			e.String(path)
		})
		if rand.IntN(5) == 0 {
			cycle++
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			write(evs[2], func(e *eventdef.Encoder) {
				e.Uint(cycle)
				e.Uint(ms.HeapAlloc)
			})
		}
	}
}
