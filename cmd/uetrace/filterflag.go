package main

import (
	"errors"
	"strings"

	"github.com/spf13/pflag"
)

// eventFilters holds -e EVENT and --filter EXPR in the order given: as in
// perf record, a --filter applies to the -e just before it, and a second
// --filter for the same -e is joined to the first with && (perf's
// evsel__append_tp_filter).
type eventFilters struct {
	events  []string
	filters []string // filters[i] is events[i]'s, "" for none
}

// eventFlag is -e: each use adds an event without a filter.
type eventFlag struct{ l *eventFilters }

// String is "" with no events, so that help shows no "(default [])" after
// the usage text's own default (pflag prints a Value's default unless it is
// a zero it knows).
func (f eventFlag) String() string {
	if len(f.l.events) == 0 {
		return ""
	}
	return "[" + strings.Join(f.l.events, ",") + "]"
}
func (f eventFlag) Type() string { return "stringArray" }
func (f eventFlag) Set(s string) error {
	f.l.events = append(f.l.events, s)
	f.l.filters = append(f.l.filters, "")
	return nil
}

// filterFlag is --filter: it gives the last -e its filter.
type filterFlag struct{ l *eventFilters }

func (f filterFlag) String() string { return "" }
func (f filterFlag) Type() string   { return "string" }
func (f filterFlag) Set(s string) error {
	n := len(f.l.events)
	if n == 0 {
		return errors.New("--filter must follow the -e it applies to, as in perf record: -e EVENT --filter EXPR")
	}
	if old := f.l.filters[n-1]; old != "" {
		s = "(" + old + ") && (" + s + ")"
	}
	f.l.filters[n-1] = s
	return nil
}

// add registers -e/--event and --filter on fs with the help texts given.
func (l *eventFilters) add(fs *pflag.FlagSet, eventUsage, filterUsage string) {
	fs.VarP(eventFlag{l}, "event", "e", eventUsage)
	fs.Var(filterFlag{l}, "filter", filterUsage)
}
