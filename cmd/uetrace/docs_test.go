package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/uetrace/uetrace/internal/testutil"
)

// The README and docs/ show commands to paste and what they print. These
// tests keep both true: every uetrace command line names a command and
// flags that exist, the daemon's limits are serve's defaults, and the
// output shown is what the command prints. (The README's C program is
// the module root's docs_test.go's.)

// docPages are README.md and docs/*.md, relative to this package.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	return append([]string{"../../README.md"}, pages...)
}

// docBlock is a fenced block of a page.
type docBlock struct {
	page, lang, text string
}

var fence = regexp.MustCompile("(?ms)^```(\\w+)\\n(.*?)^```$")

func docBlocks(t *testing.T, langs ...string) []docBlock {
	t.Helper()
	var blocks []docBlock
	for _, page := range docPages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fence.FindAllStringSubmatch(string(text), -1) {
			if slices.Contains(langs, m[1]) {
				blocks = append(blocks, docBlock{strings.TrimPrefix(page, "../../"), m[1], m[2]})
			}
		}
	}
	return blocks
}

// shellWords splits a shell line into words and the operators between
// commands (|, ;, &, &&, ||, <(, )), as sh would for what the pages show:
// quotes, no expansions; a # outside quotes starts a comment. ok is false
// when a quote is left open (the command goes on on the next line).
func shellWords(line string) (words []string, ok bool) {
	var cur strings.Builder
	inWord := false
	var quote byte
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case c == '#' && !inWord:
			flush()
			return words, true
		case strings.IndexByte("|;&()<>", c) >= 0:
			flush()
			words = append(words, string(c))
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, quote == 0
}

// uetraceCommands returns the argument lists of the uetrace invocations in
// a block of shell lines ("$ " lines only, for console blocks).
func uetraceCommands(b docBlock) [][]string {
	var out [][]string
	var pending string
	for _, line := range strings.Split(b.text, "\n") {
		if b.lang == "console" && pending == "" {
			var ok bool
			if line, ok = strings.CutPrefix(line, "$ "); !ok {
				continue
			}
		}
		words, ok := shellWords(pending + line)
		if !ok {
			pending += line + "\n"
			continue
		}
		pending = ""
		var cmd []string
		for _, w := range append(words, ";") {
			if len(w) == 1 && strings.Contains("|;&()<>", w) {
				if args, ok := uetraceArgs(cmd); ok {
					out = append(out, args)
				}
				cmd = nil
				continue
			}
			cmd = append(cmd, w)
		}
	}
	return out
}

// uetraceArgs recognises a uetrace invocation: uetrace, ./uetrace or go
// run ./cmd/uetrace, after sudo and VAR=value assignments.
func uetraceArgs(cmd []string) ([]string, bool) {
	for len(cmd) > 0 && (cmd[0] == "sudo" || regexp.MustCompile(`^[A-Z_]+=`).MatchString(cmd[0])) {
		cmd = cmd[1:]
	}
	switch {
	case len(cmd) > 0 && (cmd[0] == "uetrace" || cmd[0] == "./uetrace"):
		return cmd[1:], true
	case len(cmd) > 2 && cmd[0] == "go" && cmd[1] == "run" && cmd[2] == "./cmd/uetrace":
		return cmd[3:], true
	}
	return nil, false
}

// TestDocsCommandLines checks that every uetrace command line of the pages'
// sh and console blocks names a command uetrace has, with flags it has, and
// that a default the prose gives is the flag's.
func TestDocsCommandLines(t *testing.T) {
	n := 0
	for _, b := range docBlocks(t, "sh", "console") {
		for _, args := range uetraceCommands(b) {
			n++
			line := "uetrace " + strings.Join(args, " ")
			root := newRootCmd()
			root.InitDefaultCompletionCmd() // as Execute does
			cmd, rest, err := root.Find(args)
			if err != nil || (cmd == root && len(rest) > 0 && !strings.HasPrefix(rest[0], "-")) {
				t.Errorf("%s: %s: no such command (%v)", b.page, line, err)
				continue
			}
			for _, a := range rest {
				if a == "--" {
					break
				}
				if !regexp.MustCompile(`^--?[a-zA-Z]`).MatchString(a) {
					continue // data, or a value
				}
				if docFlag(cmd, a) == nil {
					t.Errorf("%s: %s: %s has no flag %s", b.page, line, cmd.CommandPath(), a)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d uetrace command lines in the pages, want many: the scan is broken", n)
	}

	// Prose that gives a flag's default, "`--flag` (default V)", gives
	// the default of that flag of some command.
	root := newRootCmd()
	defaults := map[string][]string{}
	var visit func(*cobra.Command)
	visit = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { defaults[f.Name] = append(defaults[f.Name], flagDefault(f)) })
		for _, sub := range c.Commands() {
			visit(sub)
		}
	}
	visit(root)
	said := regexp.MustCompile("`--([a-z-]+)` \\(default ([^)]+)\\)")
	for _, page := range docPages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range said.FindAllStringSubmatch(string(text), -1) {
			if !slices.Contains(defaults[m[1]], m[2]) {
				t.Errorf("%s says --%s's default is %s; the commands' are %q", page, m[1], m[2], defaults[m[1]])
			}
		}
	}
}

// docFlag looks up a flag as written on a command line (--name, --name=v,
// -x) among cmd's own and inherited flags.
func docFlag(cmd *cobra.Command, arg string) *pflag.Flag {
	name, _, _ := strings.Cut(arg, "=")
	if long, ok := strings.CutPrefix(name, "--"); ok {
		if f := cmd.Flags().Lookup(long); f != nil {
			return f
		}
		return cmd.InheritedFlags().Lookup(long)
	}
	short := name[1:2]
	if f := cmd.Flags().ShorthandLookup(short); f != nil {
		return f
	}
	return cmd.InheritedFlags().ShorthandLookup(short)
}

// TestDocsLimits checks docs/access.md's table of the daemon's limits: each
// row's serve flags exist and their defaults are in its Default column,
// and every limit serve has (a flag whose help says what happens "beyond")
// has a row.
func TestDocsLimits(t *testing.T) {
	access, err := os.ReadFile("../../docs/access.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(access), "\n## Limits\n")
	if !ok {
		t.Fatal(`docs/access.md has no "## Limits" section`)
	}
	serve, _, err := newRootCmd().Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(row, "| "), " | ")
		if len(cells) != 4 || !strings.HasPrefix(cells[3], "`--") {
			continue
		}
		for _, m := range regexp.MustCompile("`--([a-z-]+)`").FindAllStringSubmatch(cells[3], -1) {
			f := serve.Flags().Lookup(m[1])
			if f == nil {
				t.Errorf("docs/access.md: serve has no flag --%s", m[1])
				continue
			}
			listed[m[1]] = true
			def := flagDefault(f)
			if !regexp.MustCompile(`(^|[ (])` + regexp.QuoteMeta(def) + `($|[ ,)])`).MatchString(cells[1]) {
				t.Errorf("docs/access.md: the default of --%s is %s, the table says %q", m[1], def, cells[1])
			}
		}
	}
	if len(listed) == 0 {
		t.Fatal("docs/access.md's Limits table has no rows")
	}
	serve.Flags().VisitAll(func(f *pflag.Flag) {
		if strings.Contains(f.Usage, "beyond") && !listed[f.Name] {
			t.Errorf("docs/access.md's Limits table lacks serve --%s (%s)", f.Name, f.Usage)
		}
	})
}

// flagDefault is a flag's default as its help shows it: cobra's, or the
// "(default N" of the usage text where 0 stands for it.
func flagDefault(f *pflag.Flag) string {
	if f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "" {
		return f.DefValue
	}
	if m := regexp.MustCompile(`\(default ([^;,) ]+)`).FindStringSubmatch(f.Usage); m != nil {
		return m[1]
	}
	return f.DefValue
}

// sourceLines are the lines of the string literals of the packages whose
// output the pages show, tests included (their goldens are real output):
// each as it is, and as a pattern where it is a format.
func sourceLines(t *testing.T) (lines map[string]bool, formats []*regexp.Regexp) {
	t.Helper()
	lines = map[string]bool{}
	verb := regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`)
	for _, dir := range []string{".", "../../internal/report", "../../internal/export"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, file := range files {
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for _, l := range strings.Split(s, "\n") {
					l = strings.TrimSpace(l)
					if l == "" {
						continue
					}
					lines[l] = true
					if verb.MatchString(l) {
						var re strings.Builder
						last := 0
						for _, loc := range verb.FindAllStringIndex(l, -1) {
							re.WriteString(regexp.QuoteMeta(l[last:loc[0]]) + ".+")
							last = loc[1]
						}
						re.WriteString(regexp.QuoteMeta(l[last:]))
						formats = append(formats, regexp.MustCompile("^"+re.String()+"$"))
					}
				}
				return true
			})
		}
	}
	return lines, formats
}

// consoleSession is a console block's commands, each with what it prints.
type consoleSession struct {
	command string
	output  []string
}

func consoleSessions(text string) []consoleSession {
	var out []consoleSession
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			out = append(out, consoleSession{command: cmd})
		} else if len(out) > 0 && line != "..." {
			out[len(out)-1].output = append(out[len(out)-1].output, line)
		}
	}
	return out
}

// normaliseRun makes a line of a run comparable with another run's: the
// numbers (decimal and hex), the fields' values (the demo picks them at
// random: a path, a status) and the space between columns vary.
func normaliseRun(line string) string {
	line = regexp.MustCompile(`(\w)=\S+`).ReplaceAllString(line, "$1=")
	line = regexp.MustCompile(`0x[0-9a-f]+`).ReplaceAllString(line, "0x0")
	line = regexp.MustCompile(`[0-9]+`).ReplaceAllString(line, "0")
	return strings.Join(strings.Fields(line), " ")
}

// TestDocsConsoleOutput checks what the pages' console blocks show: the
// demo's session against a run of the demo (numbers aside), a command
// whose answer depends only on its arguments (write, describe) against
// its run in-process, and any other line against the string literals
// and format strings of the code that prints it.
func TestDocsConsoleOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	lines, formats := sourceLines(t)
	var demo []string
	checked := 0
	for _, b := range docBlocks(t, "console") {
		for _, s := range consoleSessions(b.text) {
			args, _ := shellWords(s.command)
			args, isUetrace := uetraceArgs(args)
			switch {
			case strings.Contains(b.text, "demo_"):
				if demo == nil {
					out, err := exec.Command(testutil.Uetrace(t), "demo", "--duration", "2s").CombinedOutput()
					if err != nil {
						t.Fatalf("demo: %v\n%s", err, out)
					}
					for _, l := range strings.Split(string(out), "\n") {
						demo = append(demo, normaliseRun(l))
					}
				}
				for _, l := range append([]string{"$ " + s.command}, s.output...) {
					checked++
					if !slices.Contains(demo, normaliseRun(l)) {
						t.Errorf("%s: the demo prints no line like\n%s", b.page, l)
					}
				}
			case isUetrace && len(args) > 0 && (args[0] == "write" || args[0] == "describe"):
				cmd := exec.Command(testutil.Uetrace(t), append([]string{"--backend", "inprocess"}, args...)...)
				out, _ := cmd.CombinedOutput()
				checked++
				if got, want := strings.TrimRight(string(out), "\n"), strings.Join(s.output, "\n"); got != want {
					t.Errorf("%s: $ %s\nprints\n%s\nthe page shows\n%s", b.page, s.command, got, want)
				}
			default:
				for _, l := range s.output {
					checked++
					l = strings.TrimSpace(l)
					if lines[l] || slices.ContainsFunc(formats, func(re *regexp.Regexp) bool { return re.MatchString(l) }) {
						continue
					}
					t.Errorf("%s: $ %s\nshows a line that is neither a golden nor a format of cmd/uetrace, report or export:\n%s", b.page, s.command, l)
				}
			}
		}
	}
	if demo == nil || checked < 10 {
		t.Fatalf("checked %d lines, the demo's among them: %v; the scan is broken", checked, demo != nil)
	}
}

// The pages' shell scanner must see what sh sees.
func TestShellWords(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
		ok   bool
	}{
		{`uetrace trace -e 'myapp_*'   # a comment`, []string{"uetrace", "trace", "-e", "myapp_*"}, true},
		{`source <(uetrace completion bash)`, []string{"source", "<", "(", "uetrace", "completion", "bash", ")"}, true},
		{`a "b c" | d 2>&1`, []string{"a", "b c", "|", "d", "2", ">", "&", "1"}, true},
		{`uetrace run -- sh -c 'echo x`, []string{"uetrace", "run", "--", "sh", "-c", "echo x"}, false},
		{`a#b`, []string{"a#b"}, true},
	} {
		got, ok := shellWords(c.line)
		if !slices.Equal(got, c.want) || ok != c.ok {
			t.Errorf("shellWords(%q) = %q, %v; want %q, %v", c.line, got, ok, c.want, c.ok)
		}
	}
	cmds := uetraceCommands(docBlock{lang: "sh", text: "UETRACE_SOCKET=/s uetrace status\nsudo uetrace serve --mode 0666 & uetrace run -- sh -c 'a\nb'\ngo run ./cmd/uetrace demo\n"})
	want := [][]string{{"status"}, {"serve", "--mode", "0666"}, {"run", "--", "sh", "-c", "a\nb"}, {"demo"}}
	if !slices.EqualFunc(cmds, want, slices.Equal) {
		t.Errorf("uetraceCommands = %q, want %q", cmds, want)
	}
}
