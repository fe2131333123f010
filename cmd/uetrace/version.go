package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is what --version and "uetrace version" print: the module
// version ("(devel)" for a build from a checkout), the VCS revision the
// go command stamped into the binary, whether the tree had uncommitted
// changes, and the Go release, e.g. "uetrace (devel) rev abc1234def56
// (modified) go1.26.8".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "uetrace (unknown: built without module support)"
	}
	return versionOf(bi)
}

// versionOf words the build information bi as version does. A binary built
// with -buildvcs=false (or outside a checkout) has no revision to show.
func versionOf(bi *debug.BuildInfo) string {
	v := "uetrace " + bi.Main.Version
	if v == "uetrace " {
		v += "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		v += " rev " + rev[:min(12, len(rev))]
		if modified == "true" {
			v += " (modified)"
		}
	}
	return v + " " + bi.GoVersion
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print uetrace's version, VCS revision and Go release (as --version does)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version())
			return err
		},
	}
}
