package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/internal/report"
	"github.com/uetrace/uetrace/perfdata"
)

func newReportCmd() *cobra.Command {
	var (
		input, format, output string
		timeMode              string
		pids                  []int
		comms                 []string
	)
	cmd := &cobra.Command{
		Use:   "report [-i FILE | FILE] [--format text|json|perfetto] [-o OUT]",
		Short: "Decode a perf.data file's events as text, JSON lines or a Perfetto trace",
		Long: `report reads a perf.data file — made by "uetrace record", by perf record or by Microsoft's perf-collect —
and writes its tracepoint samples in time order, decoded by the event formats
stored in the file (so events deleted since are still decoded):

  text      one line per event like perf script: comm, pid/tid, CPU, time,
            event, and the fields as name=value
  json      one JSON object per line: time (ns), cpu, pid, tid, comm, system,
            name and fields (numbers as numbers, text as strings, other
            bytes as hex)
  perfetto  a Perfetto trace (open it at ui.perfetto.dev): a track per
            process and thread, an instant event per record with its fields

--pid and --comm keep only some tasks' samples, as perf script's do: --pid
the processes with those ids (every thread of them), --comm the tasks with
that name (exactly, as it was when the sample was taken); given both, a
sample must match both.

EventHeader events (Microsoft's LinuxTracepoints format, "<provider>_L<n>K<hex>"
tracepoints) are decoded from their own metadata: the text shows
Provider:Event and the fields as name=value, JSON lines add "event" and
"meta" (level, keyword, opcode, id, version, tag, activity ids), Perfetto
names the event Provider:Event. In Perfetto an ActivityStart and its
ActivityStop are a slice: those with an activity id on a track of their own
named Provider:Event in the process's group (overlapping activities need
not nest), those without on the thread's track (nested: a stop ends the
thread's innermost open start); the stop's fields are the slice's "stop."
arguments. A stop with no start to end is an instant, and a start never
stopped a slice that does not end; both are counted on stderr.

--time wall adds wall-clock times, from the clock data perf record -k
CLOCK_MONOTONIC stores: text shows them before the time column as perf
script -F +tod does (local time), JSON adds "wall_ns" (ns since 1970), and a
Perfetto trace is timed by them. A file without clock data is an error.

FILE (-i FILE, as perf script and uetrace export take it, or the argument)
defaults to perf.data; "-" reads standard input. Pipe-mode streams
(perf record -o -) are read as well as files. Records lost while recording are reported on
stderr.`,
		Example: `  uetrace report
  uetrace report req.data --format json | jq .fields
  perf record -e 'user_events:*' -a -o - | uetrace report -
  uetrace report req.data --format perfetto -o req.pftrace`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := report.ParseFormat(format)
			if err != nil {
				return err
			}
			if err := checkPIDs("report", pids); err != nil {
				return err
			}
			in := input
			if len(args) == 1 {
				if input != "" {
					return usageErr(cmd, args, "takes the file once: -i FILE or FILE, not both")
				}
				in = args[0]
			}
			if in == "" {
				in = "perf.data"
			}
			var r *perfdata.Reader
			if in == "-" {
				// A pipe (perf record -o - | uetrace report -) cannot be
				// mapped or read at offsets: read it whole.
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("reading stdin: %w", err)
				}
				if r, err = perfdata.NewReader(bytes.NewReader(b), int64(len(b))); err != nil {
					return fmt.Errorf("stdin: %w", err)
				}
			} else if r, err = perfdata.Open(in); err != nil {
				return err
			}
			defer r.Close()
			var w io.Writer = cmd.OutOrStdout()
			if output != "" && output != "-" {
				out, err := os.Create(output)
				if err != nil {
					return err
				}
				defer out.Close()
				w = out
			} else if f == report.Perfetto && isTerminal(w) {
				return fmt.Errorf("a Perfetto trace is binary: give -o FILE: %w", unix.EINVAL)
			}
			opts := report.Options{Format: f, Filter: report.Filter{PIDs: pids, Comms: comms}}
			switch timeMode {
			case "perf":
			case "wall":
				opts.Wall = true
			default:
				return fmt.Errorf("--time %q: want perf or wall: %w", timeMode, unix.EINVAL)
			}
			sum, err := report.WriteOptions(w, r, opts)
			if err != nil {
				return fmt.Errorf("%s: %w", in, err)
			}
			if c, ok := w.(io.Closer); ok && w != cmd.OutOrStdout() {
				if err := c.Close(); err != nil {
					return err
				}
			}
			if sum.Lost > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d records were lost while recording %s\n", sum.Lost, in)
			}
			if sum.Undecoded > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d samples have no event format in %s; their fields are not shown\n", sum.Undecoded, in)
			}
			if sum.UnmatchedStops > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d EventHeader ActivityStop events in %s have no open ActivityStart to end (none with their activity id, or without one none on their thread); they are shown as instants\n", sum.UnmatchedStops, in)
			}
			if sum.OpenStarts > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d EventHeader ActivityStart events in %s are never stopped; Perfetto shows their slices as not ended\n", sum.OpenStarts, in)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text, json or perfetto")
	cmd.Flags().StringVarP(&input, "input", "i", "", `the perf.data file to read ("-": standard input; default perf.data), as perf script -i`)
	cmd.Flags().StringVarP(&output, "output", "o", "", "write here instead of stdout")
	cmd.Flags().StringVar(&timeMode, "time", "perf", "perf (the recording clock) or wall (also wall-clock times, from the file's clock data)")
	cmd.Flags().IntSliceVar(&pids, "pid", nil, "only samples of these processes (comma-separated or repeated)")
	cmd.Flags().StringArrayVar(&comms, "comm", nil, "only samples of tasks with this name (repeatable)")
	return cmd
}
