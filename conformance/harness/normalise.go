package harness

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/uetrace/uetrace/internal/subsys"
)

// A type ID in raw output, before normalisation.
var idMark = regexp.MustCompile(`⟪ID (\d+)⟫`)

func markID(s string) string {
	if _, err := strconv.ParseUint(s, 10, 32); err != nil {
		return s
	}
	return "⟪ID " + s + "⟫"
}

// traceLine is a record line of the trace file: "  comm-pid  [cpu] flags  ts: rest".
var traceLine = regexp.MustCompile(`^\s*(.*)-(\d+)\s+\[(\d{3})\]\s(\S{4,5})\s+(\d+\.\d{6}): (.*)$`)

// maskTraceLine masks what differs from run to run in a trace record line:
// pid, CPU, timestamp — and the task name. Linux prints the name from its
// saved_cmdlines, which the sched_switch and sched_wakeup probes fill only
// after a commit set trace_taskinfo_save on that CPU (kernel/trace/trace.c,
// trace_sched_switch.c); whether a switch or wakeup came before the trace
// is read is up to the scheduler, so the kernel prints "<...>" or the name.
// (The name's text is checked by internal/ftrace's kernel goldens.) Of the
// flags, need-resched (the second) is masked too: the kernel shows whether
// the writer happened to be due for rescheduling (subsys documents that it
// never is); the others are compared.
func maskTraceLine(line string) string {
	if strings.HasPrefix(line, "#") {
		return line
	}
	m := traceLine.FindStringSubmatch(line)
	if m == nil {
		return line
	}
	flags := m[4]
	if len(flags) == 5 {
		flags = flags[:1] + "?" + flags[2:]
	}
	return "<task>-<pid> [CPU] " + flags + " <ts>: " + m[6]
}

// errorLogStamp is the time stamp that starts an error_log entry,
// "[   12.345678] " (tracing_err_log_seq_show).
var errorLogStamp = regexp.MustCompile(`^\[ *\d+\.\d{6}\] `)

// maskErrorLogLine masks an error_log entry's time stamp, which is the
// clock's when the error was logged.
func maskErrorLogLine(line string) string {
	return errorLogStamp.ReplaceAllString(line, "[<ts>] ")
}

// multiNames are the names a scenario registers with MULTI_FORMAT, whose
// tracepoints are "name.<hexid>".
func multiNames(steps []Step) []string {
	var names []string
	for _, st := range steps {
		if st.Verb == "child" {
			names = append(names, multiNames(st.Child)...)
			continue
		}
		if st.Verb != "reg" {
			continue
		}
		pos, kv := st.options()
		if len(pos) < 2 || !isMulti(kv["flags"]) {
			continue
		}
		name, _, _ := strings.Cut(pos[1], " ")
		names = append(names, name)
	}
	return names
}

func isMulti(flags string) bool {
	for _, f := range strings.Split(flags, ",") {
		if f == "multi" {
			return true
		}
		if v, err := strconv.ParseUint(f, 0, 16); err == nil && v&2 != 0 {
			return true
		}
	}
	return false
}

// normalise rewrites a scenario's raw output so that backends compare: type
// IDs become <ID+k> and multi-format ids name.<M+k>, k counted from the
// first one handed out (both come from global counters whose starting
// points differ between the kernel and uetrace). A kernel hands out type
// IDs upwards from its built-in ones, the lowest free first, so k counts up
// from the lowest ID the scenario printed; uetrace hands them out from
// subsys.DefaultLastID down, the highest free first (subsys's package doc
// says why), so for IDs at or above subsys.DefaultFirstID, where no
// kernel's are, k counts down from the highest.
func normalise(raw string, multi []string) string {
	out := relabelIDs(raw)
	if len(multi) == 0 {
		return out
	}
	sort.Slice(multi, func(i, j int) bool { return len(multi[i]) > len(multi[j]) })
	var alts []string
	for _, n := range multi {
		if n != "" {
			alts = append(alts, regexp.QuoteMeta(n))
		}
	}
	if len(alts) == 0 {
		return out
	}
	re := regexp.MustCompile(`(^|[\s/:'"=])(` + strings.Join(alts, "|") + `)\.([0-9a-f]+)\b`)
	return relabel(out, re, 3, 16, func(m []string, k int) string {
		return m[1] + m[2] + ".<M+" + strconv.Itoa(k) + ">"
	})
}

// relabelIDs replaces each marked type ID by <ID+k> (see normalise).
func relabelIDs(raw string) string {
	label := func(_ []string, k int) string { return "<ID+" + strconv.Itoa(k) + ">" }
	highest := -1
	for _, m := range idMark.FindAllStringSubmatch(raw, -1) {
		v, err := strconv.Atoi(m[1])
		if err != nil || v < subsys.DefaultFirstID {
			return relabel(raw, idMark, 1, 10, label)
		}
		highest = max(highest, v)
	}
	return idMark.ReplaceAllStringFunc(raw, func(match string) string {
		v, _ := strconv.Atoi(idMark.FindStringSubmatch(match)[1])
		return label(nil, highest-v)
	})
}

// relabel replaces each match of re by repl(match, value - lowest value),
// where value is submatch group parsed as a number in base.
func relabel(s string, re *regexp.Regexp, group, base int, repl func(m []string, k int) string) string {
	lowest := uint64(1<<64 - 1)
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		if v, err := strconv.ParseUint(m[group], base, 64); err == nil && v < lowest {
			lowest = v
		}
	}
	return re.ReplaceAllStringFunc(s, func(match string) string {
		m := re.FindStringSubmatch(match)
		v, _ := strconv.ParseUint(m[group], base, 64)
		return repl(m, int(v-lowest))
	})
}
