package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// dataCommands take user_events text as arguments — tracefs writes, event
// commands, names, patterns — where a leading '-' is data, not a flag:
// "-:myev" is the kernel's own delete syntax for dynamic_events, "-1" a
// value.
var dataCommands = map[string]bool{
	"write": true, "register": true, "delete": true, "emit": true,
	"describe": true, "enable": true, "disable": true, "cat": true,
}

// dataArgs rewrites the command line of a data command so that pflag,
// which takes any argument starting with '-' for a flag, takes only the
// command's real flags as flags: they go first, then "--", then the
// positional arguments in their order. A single-dash argument that is not
// one of the command's flags ("-:myev", "-1") is data; so is everything
// after a "--" the user wrote. An unknown "--long" argument before the
// first positional one stays a flag, so that a misspelt option is still
// reported as one; after it, it is data (a misspelt flag there still fails:
// the command then has one argument too many, and a misspelt "--trunc" is
// rejected by the kernel as a line). Flags given after the
// data keep working ("emit CMD --field a=1").
func dataArgs(root *cobra.Command, args []string) []string {
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root || !dataCommands[cmd.Name()] {
		return args
	}
	cmd.InitDefaultHelpFlag()
	flags := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
	flags.AddFlagSet(cmd.Flags())
	flags.AddFlagSet(cmd.InheritedFlags())

	var opts, pos []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i+1:]...)
			break
		}
		n, ok := flagArgs(flags, a)
		if ok && len(pos) > 0 && strings.HasPrefix(a, "--") && !knownLong(flags, a) {
			// Past the first argument an unknown "--x" is data:
			// "write dynamic_events --:x" reaches the kernel, which
			// answers EINVAL for it as for any line it cannot take.
			ok = false
		}
		if !ok {
			pos = append(pos, a)
			continue
		}
		end := min(i+n, len(rest))
		opts = append(opts, rest[i:end]...)
		i = end - 1
	}
	out := append([]string{cmd.Name()}, opts...)
	out = append(out, "--")
	return append(out, pos...)
}

// flagArgs reports whether a is a flag of fs and how many arguments it
// takes up (2 when its value is the next argument).
func flagArgs(fs *pflag.FlagSet, a string) (int, bool) {
	switch {
	case len(a) < 2 || a[0] != '-':
		return 0, false
	case strings.HasPrefix(a, "--"):
		name, _, hasValue := strings.Cut(a[2:], "=")
		f := fs.Lookup(name)
		if f != nil && !hasValue && f.NoOptDefVal == "" {
			return 2, true
		}
		return 1, true
	}
	// A cluster of shorthands, "-qe EVENT" or "-eEVENT": every letter
	// must be a flag, up to one that takes a value.
	for i := 1; i < len(a); i++ {
		f := fs.ShorthandLookup(a[i : i+1])
		if f == nil {
			return 0, false
		}
		if f.NoOptDefVal == "" {
			if i+1 < len(a) {
				return 1, true
			}
			return 2, true
		}
	}
	return 1, true
}

// knownLong reports whether a, "--name" or "--name=value", is a flag of fs.
func knownLong(fs *pflag.FlagSet, a string) bool {
	name, _, _ := strings.Cut(a[2:], "=")
	return fs.Lookup(name) != nil
}
