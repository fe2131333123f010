package uetrace_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Go of the README, of docs/ and of doc comments is shown to people
// who will paste it: each must be the code of an Example function
// (compiled by go vet and go test, and run where it has an Output comment),
// so it cannot name what does not exist or drift from the API. These tests find each
// block, line for line, in some Example's body.

// TestREADMEGoIsExamples checks every ```go block of README.md and of the
// pages in docs/.
func TestREADMEGoIsExamples(t *testing.T) {
	examples := exampleBodies(t)
	for _, file := range docPages(t) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks := regexp.MustCompile("(?ms)^```go\n(.*?)^```$").FindAllStringSubmatch(string(text), -1)
		if file == "README.md" && len(blocks) == 0 {
			t.Fatal("README.md has no ```go block: this test would check nothing")
		}
		for _, b := range blocks {
			if where := findBlock(examples, b[1]); where == "" {
				t.Errorf("%s: this Go block is not the body of any Example function (put it in one, in the package it uses, and keep the two the same):\n%s", file, b[1])
			} else {
				t.Logf("%s: block found in %s", file, where)
			}
		}
	}
}

// docPages are the pages a reader is given: README.md and docs/*.md.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md: the README's links lead nowhere")
	}
	return append([]string{"README.md"}, pages...)
}

// TestDocGoIsExamples checks every code block of a doc comment that parses
// as Go statements (command lines, grammars, wire formats and JSON do not).
func TestDocGoIsExamples(t *testing.T) {
	examples := exampleBodies(t)
	n := 0
	for _, file := range goFiles(t, false) {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, cg := range f.Comments {
			for _, block := range codeBlocks(cg.Text()) {
				if !isGo(block) {
					continue
				}
				n++
				if where := findBlock(examples, block); where == "" {
					t.Errorf("%s: the Go in this doc comment is not the body of any Example function (put it in one and keep the two the same):\n%s", file, block)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go found in doc comments: the scan is broken (userevents' package doc has some)")
	}
}

// goFiles lists the module's .go files, test files or the others.
func goFiles(t *testing.T, tests bool) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && strings.HasSuffix(name, "_test.go") == tests {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// exampleBodies maps "file: ExampleName" to the lines of the function's
// body.
func exampleBodies(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, file := range goFiles(t, true) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
				continue
			}
			body := src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset]
			out[file+": "+fn.Name.Name] = strings.Split(string(body), "\n")
		}
	}
	if len(out) == 0 {
		t.Fatal("no Example functions found")
	}
	return out
}

// findBlock says which example contains block's lines in a row, each with
// the same extra indentation, blank lines matching blank lines.
func findBlock(examples map[string][]string, block string) string {
	want := dedent(strings.Split(strings.TrimRight(block, "\n"), "\n"))
	for where, body := range examples {
		for i := 0; i+len(want) <= len(body); i++ {
			if matchAt(body[i:i+len(want)], want) {
				return where
			}
		}
	}
	return ""
}

func matchAt(got, want []string) bool {
	prefix, ok := strings.CutSuffix(got[0], want[0])
	if !ok || strings.Trim(prefix, "\t") != "" {
		return false
	}
	for i := range want {
		if want[i] == "" {
			if strings.TrimSpace(got[i]) != "" {
				return false
			}
			continue
		}
		if got[i] != prefix+want[i] {
			return false
		}
	}
	return true
}

// dedent removes the leading tabs all non-blank lines share.
func dedent(lines []string) []string {
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if common < 0 || n < common {
			common = n
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			out[i] = l[max(common, 0):]
		}
	}
	return out
}

// codeBlocks returns the indented blocks of a doc comment's text: runs of
// lines starting with a tab, blank lines inside a run included.
func codeBlocks(text string) []string {
	var blocks []string
	var cur []string
	flush := func() {
		for len(cur) > 0 && cur[len(cur)-1] == "" {
			cur = cur[:len(cur)-1]
		}
		if len(cur) > 0 {
			blocks = append(blocks, strings.Join(cur, "\n"))
		}
		cur = nil
	}
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "\t"):
			cur = append(cur, l)
		case l == "" && len(cur) > 0:
			cur = append(cur, l)
		default:
			flush()
		}
	}
	flush()
	return blocks
}

// isGo reports whether block parses as the statements of a function body,
// other than bare literals (a format string quoted in a comment).
func isGo(block string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+block+"\n}\n", 0)
	if err != nil {
		return false
	}
	for _, st := range f.Decls[0].(*ast.FuncDecl).Body.List {
		if es, ok := st.(*ast.ExprStmt); !ok {
			return true
		} else if _, lit := es.X.(*ast.BasicLit); !lit {
			return true
		}
	}
	return false
}

// TestDocsArchitecture checks that the two layer pictures of
// docs/architecture.md are layout_test.go's layers and tooling, top layer
// first: one line a layer, an indented line continuing the one above.
func TestDocsArchitecture(t *testing.T) {
	arch, err := os.ReadFile(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	pictures := regexp.MustCompile("(?ms)^```text\n(.*?)^```$").FindAllStringSubmatch(string(arch), -1)
	if len(pictures) != 2 {
		t.Fatalf("docs/architecture.md has %d ```text pictures, want 2 (the product's layers, then the tooling's)", len(pictures))
	}
	known := map[string]bool{}
	for _, l := range slices.Concat(layers, tooling) {
		for _, p := range l {
			known[p] = true
		}
	}
	for i, want := range [][][]string{layers, tooling} {
		got := pictureLayers(pictures[i][1], known)
		slices.Reverse(got)
		var norm [][]string
		for _, l := range want {
			norm = append(norm, slices.Sorted(slices.Values(l)))
		}
		if !slices.EqualFunc(got, norm, slices.Equal) {
			t.Errorf("docs/architecture.md's picture %d, bottom layer first, is\n  %q\nlayout_test.go's table is\n  %q", i+1, got, norm)
		}
	}
}

// pictureLayers reads a picture: the known package names of each line,
// sorted; an indented line adds to the layer above.
func pictureLayers(pic string, known map[string]bool) [][]string {
	var out [][]string
	for _, line := range strings.Split(strings.TrimRight(pic, "\n"), "\n") {
		var pkgs []string
		for _, w := range strings.Fields(line) {
			if known[w] {
				pkgs = append(pkgs, w)
			}
		}
		if len(out) > 0 && strings.HasPrefix(line, " ") {
			out[len(out)-1] = append(out[len(out)-1], pkgs...)
		} else {
			out = append(out, pkgs)
		}
	}
	for _, l := range out {
		slices.Sort(l)
	}
	return out
}
