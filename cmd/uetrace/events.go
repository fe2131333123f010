package main

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

func newRegisterCmd(g *globals) *cobra.Command {
	var persist, multi, hold bool
	cmd := &cobra.Command{
		Use:   "register [--persist] [--multi-format] [--hold] COMMAND",
		Short: "Register an event: DIAG_IOCSREG with a command like 'name u32 a; char[16] b'",
		Long: `register registers a user event from a command, "name[:flags] field; field...",
as a program would. The event exists while something holds it: --hold keeps
this registration until uetrace is interrupted; --persist (which needs
CAP_PERFMON or CAP_SYS_ADMIN) makes it outlive every user until deleted.`,
		Example: `  uetrace register --hold 'myapp_request u32 status; __rel_loc char[] path'
  sudo uetrace register --persist 'myapp_request u32 status'`,
		Args: exactArgs("COMMAND"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := g.file()
			if err != nil {
				return err
			}
			defer f.Close()
			var flags userevents.Flags
			if persist {
				flags |= userevents.Persist
			}
			if multi {
				flags |= userevents.MultiFormat
			}
			ev, err := f.Register(args[0], flags)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "registered %s on the %v backend, write index %d\n", ev.Name(), f.Backend(), ev.WriteIndex())
			switch {
			case hold:
				fmt.Fprintf(out, "holding it until interrupted\n")
				ctx, stop := interruptible(cmd)
				defer stop()
				// A daemon that exits takes the registration with it:
				// holding on would be holding nothing.
				select {
				case <-ctx.Done():
				case <-f.Hangup():
					return &userevents.Error{Op: "register --hold", Input: ev.Name(), Errno: unix.ECONNRESET,
						Reason: "the daemon at " + g.socketPath() + " hung up (it exited or dropped this client): the registration is gone"}
				}
			case !persist:
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s is not persistent and nothing else holds it, so it goes when uetrace exits; use --hold or --persist to keep it\n", ev.Name())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&persist, "persist", false, "USER_EVENT_REG_PERSIST: keep the event until deleted")
	cmd.Flags().BoolVar(&multi, "multi-format", false, "USER_EVENT_REG_MULTI_FORMAT: a name.<hexid> tracepoint per format")
	cmd.Flags().BoolVar(&hold, "hold", false, "keep the registration until interrupted")
	return cmd
}

func newDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an event: DIAG_IOCSDEL (EBUSY while anything uses it)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := g.file()
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Delete(args[0])
		},
	}
}

func newEnableCmd(g *globals, on bool) *cobra.Command {
	verb, value := "enable", "1"
	short := "Enable events in the trace buffer: write 1 to their enable files"
	if !on {
		verb, value = "disable", "0"
		short = "Disable events in the trace buffer: write 0 to their enable files"
	}
	return &cobra.Command{
		Use:   verb + " EVENT...",
		Short: short,
		Long: verb + ` selects events by "system:name" or by name, with glob patterns; a name
alone means the user_events systems, and a multi-format event answers to its
registered name as well as to its name.<hexid> versions.`,
		Example: "  uetrace " + verb + " myapp_request\n  uetrace " + verb + " 'user_events:myapp_*'",
		Args:    minArgs("one or more EVENT patterns"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs, err := g.tracefs()
			if err != nil {
				return err
			}
			defer fs.Close()
			for _, pat := range args {
				evs, err := matchEvents(fs, verb, pat, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				for _, ev := range evs {
					name := strings.Replace(ev, "/", ":", 1)
					if err := fs.WriteFile("events/"+ev+"/enable", []byte(value), 0); err != nil {
						return asOp(err, verb, "", name)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%sd %s\n", verb, name)
				}
			}
			return nil
		},
	}
}

// matchEvents returns "system/tracepoint" of the events pattern selects;
// its errors name op, the command it serves. It goes by available_events,
// the complete list: a listing of events/<system> stops at an event whose
// name no directory entry can have, which any producer may register. A
// matched event whose name no tracefs path can hold (eventdef.PathName)
// cannot be opened: it is skipped and said so on warn.
func matchEvents(fs *tracefs.Tracefs, op, pattern string, warn io.Writer) ([]string, error) {
	sysPat, tpPat, qualified := strings.Cut(pattern, ":")
	if !qualified {
		sysPat, tpPat = "user_events*", pattern
	}
	if _, err := path.Match(sysPat, ""); err != nil {
		return nil, &userevents.Error{Op: op, Input: pattern, Errno: unix.EINVAL, Reason: "bad glob pattern in the system part: " + err.Error()}
	}
	if _, err := path.Match(tpPat, ""); err != nil {
		return nil, &userevents.Error{Op: op, Input: pattern, Errno: unix.EINVAL, Reason: "bad glob pattern: " + err.Error()}
	}
	text, err := fs.ReadFile("available_events")
	if err != nil {
		return nil, asOp(err, op, "", pattern)
	}
	tps := eventdef.ParseAvailableEvents(text)
	slices.SortFunc(tps, func(a, b eventdef.Tracepoint) int {
		return cmp.Or(strings.Compare(a.System, b.System), strings.Compare(a.Name, b.Name))
	})
	var out []string
	skipped := 0
	for _, tp := range tps {
		if ok, _ := path.Match(sysPat, tp.System); !ok {
			continue
		}
		ok, _ := path.Match(tpPat, tp.Name)
		if !ok && tp.System == eventdef.MultiSystem {
			if i := strings.LastIndexByte(tp.Name, '.'); i > 0 {
				ok, _ = path.Match(tpPat, tp.Name[:i])
			}
		}
		if !ok {
			continue
		}
		if !eventdef.PathName(tp.Name) {
			skipped++
			fmt.Fprintf(warn, "uetrace %s: skipping %s:%q: no tracefs path can name it (empty, '/', '.' or '..')\n", op, tp.System, tp.Name)
			continue
		}
		out = append(out, tp.System+"/"+tp.Name)
	}
	if len(out) == 0 {
		reason := "no event matches (uetrace status lists them)"
		if skipped > 0 {
			reason = fmt.Sprintf("no event it can use matches: the %d that match were skipped", skipped)
		}
		return nil, &userevents.Error{Op: op, Input: pattern, Errno: unix.ENOENT, Reason: reason}
	}
	return out, nil
}

func newEmitCmd(g *globals) *cobra.Command {
	var (
		fields []string
		multi  bool
		eh     bool
		h      ehHeader
	)
	cmd := &cobra.Command{
		Use:   "emit COMMAND [--field name=value]... | emit --eventheader TRACEPOINT --name EVENT [--field name=type:value]...",
		Short: "Register an event and write one record of it: logger(1) for user_events",
		Long: `emit registers the event COMMAND describes and, if it is enabled, writes one
record with the given field values; fields not given are zero or empty.
Integers take Go syntax (42, 0x2a, -1); text fields take the text; other
arrays and structs take hex bytes. If nothing is attached to the event there
is nobody to see the record: emit says so and writes nothing.

With --eventheader, the argument is an EventHeader tracepoint,
<provider>_L<level>K<keyword>[G<group>]: emit registers it and writes one
EventHeader event named --name, at the tracepoint's level, with the fields
given in order, each name=type:value, the type one of
` + ehFieldTypes + `.`,
		Example: `  uetrace emit 'myapp_request u32 status; __rel_loc char[] path' --field status=200 --field path=/index.html
  uetrace emit --eventheader MyProvider_L4K1 --name MyEvent --field status=u32:200 --field path=string:/index.html`,
		Args: exactArgs("COMMAND"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if eh {
				return emitEventHeader(cmd, g, args[0], h, fields)
			}
			if h != (ehHeader{}) {
				return &userevents.Error{Op: "emit", Input: args[0], Errno: unix.EINVAL, Reason: "--name, --id, --version and --opcode are for EventHeader events: add --eventheader"}
			}
			values := map[string]string{}
			for _, kv := range fields {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return &userevents.Error{Op: "emit", Input: args[0], Errno: unix.EINVAL, Reason: fmt.Sprintf("--field %q: a field is name=value", kv)}
				}
				values[k] = v
			}
			var flags userevents.Flags
			existed := existence(g, "", "")
			if multi {
				flags = userevents.MultiFormat
			} else if name, _, err := eventdef.SplitCommand(args[0]); err == nil {
				existed = existence(g, eventdef.System, name)
			}
			f, err := g.file()
			if err != nil {
				return err
			}
			defer f.Close()
			ev, err := f.Register(args[0], flags)
			if err != nil {
				return asOp(err, "emit", "", args[0])
			}
			def := ev.Def()
			for _, kv := range fields {
				if k, _, _ := strings.Cut(kv, "="); !hasField(def, k) {
					return &userevents.Error{Op: "emit", Input: args[0], Errno: unix.EINVAL, Reason: fmt.Sprintf("--field %q: the event has no field %s", kv, k)}
				}
			}
			var enc eventdef.Encoder
			enc.Reset(def, nil)
			for i := range def.Fields {
				if err := setField(&enc, &def.Fields[i], values[def.Fields[i].Name]); err != nil {
					return asOp(err, "emit", "", args[0])
				}
			}
			payload, err := enc.Payload()
			if err != nil {
				return &userevents.Error{Op: "emit", Input: args[0], Errno: unix.EINVAL, Reason: reason(err)}
			}
			if !ev.Enabled() {
				emitNotEnabled(cmd, ev.Name(), args[0], existed)
				return nil
			}
			return asOp(ev.Write(payload), "emit", "", args[0])
		},
	}
	cmd.Flags().StringArrayVar(&fields, "field", nil, "a field's value, name=value; name=type:value with --eventheader (repeatable)")
	cmd.Flags().BoolVar(&multi, "multi-format", false, "register with USER_EVENT_REG_MULTI_FORMAT")
	cmd.Flags().BoolVar(&eh, "eventheader", false, "write an EventHeader event to the tracepoint <provider>_L<level>K<keyword>[G<group>]")
	cmd.Flags().StringVar(&h.name, "name", "", "the EventHeader event's name (with --eventheader)")
	cmd.Flags().Uint16Var(&h.id, "id", 0, "the EventHeader event's stable id (with --eventheader)")
	cmd.Flags().Uint8Var(&h.version, "version", 0, "the EventHeader event's version (with --eventheader)")
	cmd.Flags().Uint8Var(&h.opcode, "opcode", 0, "the EventHeader event's opcode: 1 activity start, 2 stop, ... (with --eventheader)")
	return cmd
}

func hasField(def *eventdef.Event, name string) bool {
	for _, f := range def.Fields {
		if f.Name == name {
			return true
		}
	}
	return false
}

// setField sets the next field from its text value ("" for zero/empty).
func setField(enc *eventdef.Encoder, f *eventdef.Field, v string) error {
	bad := func(err error) error {
		return &userevents.Error{Op: "emit", Errno: unix.EINVAL, Reason: fmt.Sprintf("--field %q: %v", f.Name+"="+v, err)}
	}
	switch {
	case f.Kind == eventdef.Integer:
		if v == "" {
			enc.Uint(0)
		} else if n, err := strconv.ParseUint(v, 0, 64); err == nil {
			enc.Uint(n)
		} else if n, err2 := strconv.ParseInt(v, 0, 64); err2 == nil {
			enc.Int(n)
		} else {
			return bad(fmt.Errorf("%s %s takes an integer", f.Type, f.Name))
		}
	case f.Kind == eventdef.Array && strings.Contains(f.Type, "char"), f.CString:
		enc.String(v)
	default:
		b, err := hex.DecodeString(strings.ReplaceAll(v, " ", ""))
		if err != nil {
			return bad(fmt.Errorf("%s %s takes hex bytes", f.Type, f.Name))
		}
		if (f.Kind == eventdef.Array || f.Kind == eventdef.Struct) && len(b) < f.Size {
			b = append(b, make([]byte, f.Size-len(b))...)
		}
		enc.Bytes(b)
	}
	return nil
}

// existed says whether an event was there before emit registered it.
type existed int

const (
	existedUnknown existed = iota // not checked: a multi-format event, or tracefs unreadable
	existedYes
	existedNo
)

// existence looks for system/name's directory in the tree, as it is before
// emit registers it; with no name it is existedUnknown.
func existence(g *globals, system, name string) existed {
	if name == "" {
		return existedUnknown
	}
	t, err := g.tracefs()
	if err != nil {
		return existedUnknown
	}
	defer t.Close()
	_, err = t.ReadFile("events/" + system + "/" + name + "/id")
	switch {
	case err == nil:
		return existedYes
	case errors.Is(err, unix.ENOENT):
		return existedNo
	}
	return existedUnknown
}

// emitNotEnabled says why emit wrote nothing — nothing is attached to the
// event, so nobody would see the record — and what would make it write.
// An event that emit itself created cannot have had anything attached, and
// it goes again when emit exits (its last reference, as at process exit in
// Linux), so enabling it afterwards finds nothing: it has to be kept
// registered first.
func emitNotEnabled(cmd *cobra.Command, name, command string, e existed) {
	w := cmd.ErrOrStderr()
	switch e {
	case existedNo:
		fmt.Fprintf(w, "uetrace: emit %s: nothing written: the event did not exist before this emit, so nothing was attached to it, and it goes when emit exits; keep it registered (uetrace register --hold %s, in another terminal), attach to it (uetrace enable %s, or uetrace record -e %s), then emit again\n",
			name, shellQuote(command), name, name)
	default:
		fmt.Fprintf(w, "uetrace: emit %s: nothing written: nothing is attached to the event (no trace, record or perf); attach to it (uetrace enable %s, or uetrace record -e %s), then emit again\n", name, name, name)
	}
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.:/=,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
