package main

//go:generate go test -run TestManPages -update

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The manual pages, made from the commands' own definitions — Use, Long,
// Example and the flags — in the form of perf's and trace-cmd's pages:
// NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXAMPLES, SEE ALSO. One page a
// command, uetrace-record(1) for uetrace record, as git's and perf's are
// named. docs/man/man1 holds them, written by TestManPages -update; the test
// checks they are what the commands say.

// manPages returns the page of root and of every command under it that a
// user can run, by file name.
func manPages(root *cobra.Command) map[string][]byte {
	// cobra adds completion only when the command runs: add it now, for
	// its pages (uetrace-completion-bash(1) says how to install it).
	root.InitDefaultCompletionCmd()
	pages := map[string][]byte{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Deprecated != "" || (c != root && !c.IsAvailableCommand()) {
			return
		}
		pages[manName(c)+".1"] = manPage(c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return pages
}

// manName is the page's name: the command path joined with '-'.
func manName(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "-")
}

// manPage writes c's page in roff (man(7) macros).
func manPage(c *cobra.Command) []byte {
	var b bytes.Buffer
	name := manName(c)
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"uetrace\" \"uetrace Manual\"\n", strings.ToUpper(name))
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "%s \\- %s\n", roffEscape(name), roffEscape(c.Short))

	b.WriteString(".SH SYNOPSIS\n")
	fmt.Fprintf(&b, ".B %s\n", roffEscape(c.CommandPath()))
	if _, rest, ok := strings.Cut(c.Use, " "); ok {
		b.WriteString(roffEscape(rest) + "\n")
	} else if c.HasAvailableSubCommands() {
		b.WriteString("\\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n")
	}

	if text := c.Long; text != "" || c.Short != "" {
		if text == "" {
			text = c.Short
		}
		b.WriteString(".SH DESCRIPTION\n")
		manText(&b, text)
	}
	if c.HasAvailableSubCommands() {
		b.WriteString(".SH COMMANDS\n")
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			fmt.Fprintf(&b, ".TP\n\\fB%s\\fR(1)\n%s\n", roffEscape(manName(sub)), roffEscape(sub.Short))
		}
	}
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		b.WriteString(".SH OPTIONS\n")
		manFlags(&b, fs)
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		b.WriteString(".SH GLOBAL OPTIONS\n")
		manFlags(&b, fs)
	}
	if c.Example != "" {
		b.WriteString(".SH EXAMPLES\n.nf\n.RS 4\n")
		for _, l := range strings.Split(strings.TrimRight(c.Example, "\n"), "\n") {
			b.WriteString(roffLine(strings.TrimPrefix(l, "  ")) + "\n")
		}
		b.WriteString(".RE\n.fi\n")
	}
	b.WriteString(".SH SEE ALSO\n")
	var see []string
	if p := c.Parent(); p != nil {
		see = append(see, "\\fB"+roffEscape(manName(p))+"\\fR(1)")
	}
	if c.Parent() == nil {
		see = append(see, "\\fBperf\\fR(1)", "\\fBtrace-cmd\\fR(1)")
	}
	b.WriteString(strings.Join(see, ", ") + "\n")
	return b.Bytes()
}

// manText writes a help text: paragraphs split at blank lines, lines
// indented by the text (lists, tables, commands) kept as they are.
func manText(b *bytes.Buffer, text string) {
	for _, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		lines := strings.Split(para, "\n")
		indented := true
		for _, l := range lines {
			if !strings.HasPrefix(l, " ") {
				indented = false
			}
		}
		if indented {
			b.WriteString(".PP\n.nf\n.RS 4\n")
			for _, l := range lines {
				b.WriteString(roffLine(strings.TrimPrefix(l, "  ")) + "\n")
			}
			b.WriteString(".RE\n.fi\n")
			continue
		}
		b.WriteString(".PP\n")
		for _, l := range lines {
			b.WriteString(roffLine(l) + "\n")
		}
	}
}

// manFlags writes one tagged paragraph a flag: -e, --event=stringArray,
// then its usage and default.
func manFlags(b *bytes.Buffer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		b.WriteString(".TP\n")
		if f.Shorthand != "" {
			fmt.Fprintf(b, "\\fB\\-%s\\fR, ", roffEscape(f.Shorthand))
		}
		fmt.Fprintf(b, "\\fB\\-\\-%s\\fR", roffEscape(f.Name))
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" {
			fmt.Fprintf(b, " \\fI%s\\fR", roffEscape(varname))
		}
		b.WriteString("\n")
		usage = roffEscape(usage)
		if def := manDefault(f); def != "" {
			usage += " (default " + roffEscape(def) + ")"
		}
		b.WriteString(usage + "\n")
	})
}

// manDefault is the default the help shows for f after its usage, or ""
// where it shows none — pflag's own rule, so that page and help agree.
func manDefault(f *pflag.Flag) string {
	line := pflag.NewFlagSet("", pflag.ContinueOnError)
	line.AddFlag(f)
	u := strings.TrimRight(line.FlagUsages(), "\n")
	_, usage := pflag.UnquoteUsage(f)
	i := strings.LastIndex(u, usage)
	if i < 0 {
		return ""
	}
	rest, ok := strings.CutPrefix(u[i+len(usage):], " (default ")
	if !ok {
		return ""
	}
	return strings.TrimSuffix(rest, ")")
}

// roffEscape escapes text for roff: backslashes, and '-' as the minus
// sign that man pages search and copy as ASCII.
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// roffLine escapes one line of running text, which roff would take for a
// request if it began with a period or an apostrophe.
func roffLine(s string) string {
	s = roffEscape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
