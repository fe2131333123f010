package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/uetrace/uetrace/eventdef"
	"github.com/uetrace/uetrace/internal/daemon/client"
	"github.com/uetrace/uetrace/internal/subsys"
	"github.com/uetrace/uetrace/tracefs"
	"github.com/uetrace/uetrace/userevents"
)

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List the user events: name, system, ID, what uses them, record counts, fields",
		Long: `status lists every user event as a table: its tracepoint, system, trace event
ID, what is attached to it (ftrace, perf, other — from user_events_status),
how many records were written to it and how many of those were dropped on
their way — a recording session's buffer or the writer's ring to the daemon
was full, or the record was longer than the trace buffer's page or perf's
8 KiB, which Linux drops without a count — and its fields as dynamic_events shows them ("char[5] a; struct S
b 8", made from its format file, which shows "char a[]" and no struct size),
followed by the Active and Busy counts.

The record counts come from the uetrace daemon, which counts each event's
writes — those of a ring set handed to a recording as the recording counts
them, up to its last pass over the rings. The kernel keeps no per-event count of user_events writes, so on the
kernel backend RECORDS and DROPPED are "-" (uetrace top measures rates there,
with perf events).

On the daemon, a last section shows what its clients hold and what it
refused them: connections (those still shaking hands, those refused over a
user's --max-conns-per-uid or the --max-conns of all, those closed for want
of a Hello in time), open files and sessions, registrations, sessions and
their buffers, buffer_size_kb, requests held ahead of a blocking read,
requests refused by the access model (EACCES, EPERM) and by a limit, the
clients' memory it maps (shared_kb: arenas and rings), the files of its FUSE
tree held open, the processes writing through the interposer's rings
(interposer_shares: since it started; _open: now), the producers' ring sets
handed to a recording to read itself (handovers: since it started; _now:
now; _forced: rings taken back from a recording that did not finish its
pass in time) — and per user: all users' for a tracer, your own for anyone
else.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fs, err := g.tracefs()
			if err != nil {
				return err
			}
			defer fs.Close()
			if err := printStatus(cmd.OutOrStdout(), fs); err != nil {
				return err
			}
			if fs.Backend() == userevents.Daemon {
				printDaemonStats(cmd.OutOrStdout(), g.socket)
			}
			return nil
		},
	}
}

// printDaemonStats prints the daemon's counts (client.Conn.Stats), if it
// keeps any: a daemon before them has nothing to add.
func printDaemonStats(out io.Writer, sock string) {
	c, err := client.Dial(sock, nil)
	if err != nil {
		return
	}
	defer c.Close()
	st, err := c.Stats()
	if err != nil {
		return
	}
	fmt.Fprintln(out, "\nDaemon:")
	for line := range strings.Lines(st) {
		fmt.Fprintf(out, "  %s", line)
	}
}

// printStatus prints the status table, a blank line and the counts.
func printStatus(out io.Writer, fs *tracefs.Tracefs) error {
	rows, footer, err := readStatus(fs)
	if err != nil {
		return err
	}
	counts, counted := readCounts(fs)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "EVENT\tSYSTEM\tID\tUSERS\tRECORDS\tDROPPED\tFIELDS")
	for _, r := range rows {
		written, dropped := "-", "-"
		if c, ok := counts[r.tracepoint]; ok {
			written, dropped = c[0], c[1]
		}
		name := r.tracepoint
		if !eventdef.PathName(name) {
			name = strconv.Quote(name) // an empty name shows as ""
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, r.system, r.id, r.users, written, dropped, r.fields)
	}
	w.Flush()
	fmt.Fprintf(out, "\n%s\n", footer)
	if !counted && len(rows) > 0 {
		fmt.Fprintln(out, "RECORDS, DROPPED: - the kernel keeps no per-event count of user_events records (uetrace top measures rates)")
	}
	return nil
}

type statusRow struct {
	tracepoint, system, id, users, fields string
}

// readCounts reads the daemon's per-event counts (subsys.FileCounts):
// records written and dropped, by tracepoint. counted is false where the
// file does not exist: the kernel has no such counts.
func readCounts(fs *tracefs.Tracefs) (counts map[string][2]string, counted bool) {
	b, err := fs.ReadFile(subsys.FileCounts)
	if err != nil {
		return nil, false
	}
	counts = make(map[string][2]string)
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 3 {
			counts[f[0]] = [2]string{f[1], f[2]}
		}
	}
	return counts, true
}

// readStatus reads user_events_status and each event's id and format.
func readStatus(fs *tracefs.Tracefs) ([]statusRow, string, error) {
	b, err := fs.ReadFile("user_events_status")
	if err != nil {
		return nil, "", err
	}
	lines, footer := splitStatus(string(b))
	var rows []statusRow
	for _, line := range lines {
		tp, used, _ := strings.Cut(line, " # Used by ")
		r := statusRow{tracepoint: tp, users: "-", id: "?", fields: "?"}
		if used != "" {
			r.users = strings.Join(strings.Fields(used), ",")
		}
		// A name no path can hold (" u32 a" registers an empty one)
		// has no format to read: its row shows "?".
		for _, sys := range []string{"user_events", "user_events_multi"} {
			if !eventdef.PathName(tp) {
				break
			}
			format, err := fs.ReadFile("events/" + sys + "/" + tp + "/format")
			if err != nil {
				continue
			}
			r.system = sys
			r.id, r.fields = parseFormat(string(format))
			break
		}
		rows = append(rows, r)
	}
	return rows, strings.Join(footer, ", "), nil
}

// splitStatus splits user_events_status into its events' lines and its
// footer: one line per event, a blank line, then "Active: N" and "Busy: N"
// (user_events_status_show). An event's line is blank too when its name
// is empty (" u32 a" registers one): the footer is the last lines, not
// what follows the first blank one.
func splitStatus(text string) (lines, footer []string) {
	lines = strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	end := len(lines)
	for end > 0 && (strings.HasPrefix(lines[end-1], "Active: ") || strings.HasPrefix(lines[end-1], "Busy: ")) {
		end--
	}
	footer = lines[end:]
	if end > 0 && lines[end-1] == "" {
		end--
	}
	return lines[:end], footer
}

// parseFormat takes the ID and the user fields from a format file, as
// dynamic_events shows them (user_event_show): "char[5] a; struct S b 8;
// u32 c" for the format's "char a[]", size 5, and "struct S b", size 8.
func parseFormat(format string) (id, fields string) {
	var fs []string
	for line := range strings.Lines(format) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "ID: "); ok {
			id = v
		}
		rest, ok := strings.CutPrefix(line, "field:")
		if !ok {
			continue
		}
		decl, attrs, _ := strings.Cut(rest, ";")
		if i := strings.LastIndexByte(decl, ' '); i >= 0 && strings.HasPrefix(decl[i+1:], "common_") {
			continue
		}
		size := -1
		for a := range strings.SplitSeq(attrs, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(a), "size:"); ok {
				if n, err := strconv.Atoi(v); err == nil {
					size = n
				}
			}
		}
		fs = append(fs, userSyntax(decl, size))
	}
	if len(fs) == 0 {
		return id, "-"
	}
	return id, strings.Join(fs, "; ")
}

// userSyntax turns a format file declaration of size bytes (-1: not
// known) into the field as the user wrote it and dynamic_events shows it:
// "__rel_loc char path[]" is "__rel_loc char[] path". The format file
// shows a fixed array "char path[16]" as "char path[]" (user_events keeps
// no array length; its fixed arrays are char and unsigned char only, so
// the length is the size), and a struct without the size that
// dynamic_events shows after its name: "struct S b 8".
func userSyntax(decl string, size int) string {
	i := strings.LastIndexByte(decl, ' ')
	if i < 0 {
		return decl
	}
	typ, name := decl[:i], decl[i+1:]
	if j := strings.IndexByte(name, '['); j >= 0 && strings.HasSuffix(name, "]") {
		dims := name[j:]
		if dims == "[]" && size >= 0 && !strings.HasPrefix(typ, "__data_loc ") && !strings.HasPrefix(typ, "__rel_loc ") {
			dims = "[" + strconv.Itoa(size) + "]"
		}
		typ, name = typ+dims, name[:j]
	}
	if strings.HasPrefix(typ, "struct ") && size >= 0 {
		return typ + " " + name + " " + strconv.Itoa(size)
	}
	return typ + " " + name
}
