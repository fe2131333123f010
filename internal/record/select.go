package record

import (
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/uetrace/uetrace/eventdef"
)

// DefaultEvents are what record selects when told nothing: every user event,
// single- and multi-format.
var DefaultEvents = []string{eventdef.System + ":*", eventdef.MultiSystem + ":*"}

// Pattern is one event selection: "system:name", either part a glob
// (path.Match); without ':' the name is matched in every system. A
// multi-format event (system user_events_multi, tracepoint "name.<hexid>")
// also answers to its registered name, so "user_events_multi:name" or
// just "name" selects every version of it. This is subsys.MatchEvent's
// rule, applied to the names tracefs shows.
type Pattern struct {
	text, system, name string
}

// ParsePattern checks a selection and returns it.
func ParsePattern(s string) (Pattern, error) {
	sys, name, hasSys := strings.Cut(s, ":")
	if !hasSys {
		sys, name = "*", s
	}
	if sys == "" || name == "" {
		return Pattern{}, fmt.Errorf("event %q: want system:name or name: %w", s, unix.EINVAL)
	}
	for _, p := range []string{sys, name} {
		if _, err := path.Match(p, ""); err != nil {
			return Pattern{}, fmt.Errorf("event %q: %v: %w", s, err, unix.EINVAL)
		}
	}
	return Pattern{text: s, system: sys, name: name}, nil
}

func (p Pattern) String() string { return p.text }

// MatchSystem reports whether events of system can match.
func (p Pattern) MatchSystem(system string) bool {
	ok, _ := path.Match(p.system, system)
	return ok
}

// Match reports whether the pattern selects tracepoint name of system.
func (p Pattern) Match(system, name string) bool {
	if !p.MatchSystem(system) {
		return false
	}
	if ok, _ := path.Match(p.name, name); ok {
		return true
	}
	if system != eventdef.MultiSystem {
		return false
	}
	base, ok := multiBase(name)
	if !ok {
		return false
	}
	ok, _ = path.Match(p.name, base)
	return ok
}

// multiBase is the registered name of a multi-format tracepoint
// "name.<hexid>".
func multiBase(tp string) (string, bool) {
	i := strings.LastIndexByte(tp, '.')
	if i <= 0 || i == len(tp)-1 {
		return "", false
	}
	for _, c := range tp[i+1:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return tp[:i], true
}
