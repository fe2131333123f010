package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/eventheader"
	"github.com/uetrace/uetrace/userevents"
)

func newDescribeCmd() *cobra.Command {
	var (
		id       int
		multiID  int64
		payloads []string
		eh       bool
	)
	cmd := &cobra.Command{
		Use:   "describe COMMAND | TRACEPOINT",
		Short: "Show what Linux makes of a user_events command or an EventHeader tracepoint: format file, dynamic_events line, trace lines",
		Long: `describe parses a user_events command ("name field1; field2 ...") exactly as
Linux 6.12 does and prints what tracefs would show for it: the
events/<system>/<name>/format file and the dynamic_events line. With
--payload, it also prints the trace line of each payload (hex bytes written
after the 4-byte write index), or why the kernel would refuse the write.
A command the kernel rejects is an error naming the errno and the field.

An EventHeader tracepoint name, <provider>_L<level>K<keyword>[G<group>] (one
word that parses as one, or any argument with --eventheader), is explained:
its provider, level, keyword and group and the command it is registered
with, then that command's format file; a --payload is decoded as an
EventHeader event and printed as JSON.`,
		Example: `  uetrace describe 'myapp_request u32 status; __rel_loc char[] path'
  uetrace describe 'counter u64 n' --payload 2a00000000000000
  uetrace describe MyProvider_L4K1`,
		Args: exactArgs("COMMAND"),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			command := args[0]
			var ehtp eventheader.TracepointName
			if eh || looksEventHeader(args[0]) {
				var err error
				if ehtp, err = ehName("describe", args[0]); err != nil {
					return err
				}
				command = describeEventHeader(out, ehtp)
				eh = true
			}
			ev, err := eventdef.Parse(command)
			if err != nil {
				var pe *eventdef.Error
				if errors.As(err, &pe) {
					return &userevents.Error{Op: "describe", Input: args[0], Errno: pe.Errno, Reason: pe.Detail()}
				}
				return fmt.Errorf("describe %q: %w", args[0], err)
			}
			system, tp := eventdef.System, ev.Name
			if multiID >= 0 {
				system, tp = eventdef.MultiSystem, eventdef.MultiName(ev.Name, uint64(multiID))
			}
			fmt.Fprintf(out, "# events/%s/%s/format\n%s", system, tp, ev.Format(tp, id))
			fmt.Fprintf(out, "\n# dynamic_events\n%s\n", ev.DynamicEventsLine())
			for _, p := range payloads {
				payload, err := hex.DecodeString(strings.ReplaceAll(p, " ", ""))
				if err != nil {
					return &userevents.Error{Op: "describe", Input: args[0], Errno: unix.EINVAL, Reason: fmt.Sprintf("--payload %q: not hex bytes: %v", p, err)}
				}
				if eh {
					describePayloadEventHeader(out, ehtp, p, payload)
					continue
				}
				record := append(make([]byte, eventdef.HeaderSize), payload...)
				if err := ev.CheckSize(len(payload)); err != nil {
					fmt.Fprintf(out, "\n# write %s\n%v\n", p, err)
					continue
				}
				if err := ev.Validate(record); err != nil {
					fmt.Fprintf(out, "\n# write %s\n%v\n", p, err)
					continue
				}
				fmt.Fprintf(out, "\n# trace (write %s)\n%s\n", p, ev.AppendTrace(nil, tp, record))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&id, "id", 0, "event type ID to show on the format file's ID line")
	cmd.Flags().Int64Var(&multiID, "multi-id", -1, "describe it as a MULTI_FORMAT event with this multi_id (name.<hexid> in user_events_multi)")
	cmd.Flags().StringArrayVar(&payloads, "payload", nil, "a payload in hex to decode as a trace line, or as an EventHeader event (repeatable)")
	cmd.Flags().BoolVar(&eh, "eventheader", false, "the argument is an EventHeader tracepoint name, <provider>_L<level>K<keyword>[G<group>]")
	return cmd
}
