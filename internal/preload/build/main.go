// Command build compiles libuetrace-preload.so from package preload's C
// source with fixed flags, so that the same compiler and linker always give
// the same bytes: `go generate ./internal/preload` runs it to make the
// object the package embeds, and the package's TestCommittedObject runs it
// again to check that the committed object is what the source builds.
//
//	go run ./internal/preload/build [-o OBJECT] [-toolchain FILE] [-dir SOURCE]
//
// The source is in package preload's c directory (a directory of its own:
// Go refuses C files in a package that does not use cgo, and the library
// must not be cgo — it is loaded into other programs, not linked into
// uetrace). It writes the object (default: libuetrace-preload_amd64.so in
// package preload's directory, where go:embed takes it) and, beside it, the toolchain that built it: the first line
// of `$CC --version` and of `ld --version` as $CC runs it (the .toolchain
// file). A different compiler or linker may make different bytes: the
// test compares only when the toolchain is the committed one.
//
// Only amd64 Linux objects are built (the library's system calls and its
// fault-tolerant copy are amd64 assembly); CC defaults to gcc.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// flags are the compiler's, each for a reason:
//
//	-O2 -g0                   optimised, no debug information (no paths, no build details)
//	-fPIC -shared             a shared object, loaded into any program
//	-fvisibility=hidden       only the interposed functions are exported (EXPORT in the source)
//	-fno-plt                  calls into libc through the GOT, no lazy-binding stubs
//	-fno-stack-protector      no __stack_chk_fail@GLIBC_2.4 import: the object needs glibc 2.17's symbols only
//	-fno-asynchronous-unwind-tables -fno-ident
//	                          no .eh_frame for code that never unwinds, no compiler .comment
//	-ffile-prefix-map=DIR=.   no source directory in anything the compiler writes
//	-nostartfiles             no crt objects (no .comment, init code or __cxa_finalize of theirs)
//	-s                        no symbol table (the dynamic symbols stay)
//	--build-id=none           no build id: the bytes are the source's, nothing else
//	-z now -z relro           every symbol bound at load, the GOT read-only after: nothing resolved from a signal handler
//	--hash-style=both         loadable by old dynamic loaders (DT_HASH) and new ones (DT_GNU_HASH)
//	--no-as-needed -l:libdl.so.2
//	                          dlsym's library before glibc 2.34 (libc.so.6 has it since; libdl.so.2 stays, empty)
var flags = []string{
	"-O2", "-g0", "-fPIC", "-shared", "-fvisibility=hidden", "-fno-plt", "-fno-stack-protector",
	"-fno-asynchronous-unwind-tables", "-fno-ident", "-std=gnu11", "-Wall", "-Wextra", "-Werror",
	"-nostartfiles", "-s",
	"-Wl,--build-id=none", "-Wl,-z,now", "-Wl,-z,relro", "-Wl,--hash-style=both",
	"-Wl,-soname,libuetrace-preload.so",
}

func main() {
	dir := flag.String("dir", ".", "package preload's directory (the source is in its c directory)")
	out := flag.String("o", "", "the object to write (default: DIR/libuetrace-preload_amd64.so)")
	tc := flag.String("toolchain", "", "where to write the toolchain's versions (default: the object's name with .toolchain)")
	symbols := flag.Bool("symbols", false, "keep the symbol table (for TestAsyncSignalSafe's disassembly; not the committed object)")
	flag.Parse()
	if *out == "" {
		*out = filepath.Join(*dir, "libuetrace-preload_amd64.so")
	}
	if *tc == "" {
		*tc = strings.TrimSuffix(*out, ".so") + ".toolchain"
	}
	if err := build(*dir, *out, *tc, *symbols); err != nil {
		fmt.Fprintln(os.Stderr, "preload/build:", err)
		os.Exit(1)
	}
}

// compiler is $CC, or gcc.
func compiler() string {
	if cc := os.Getenv("CC"); cc != "" {
		return cc
	}
	return "gcc"
}

// Toolchain is the first line of the compiler's and of its linker's
// --version.
func toolchain(cc string) (string, error) {
	var lines []string
	for _, args := range [][]string{{"--version"}, {"-Wl,--version", "-xc", "/dev/null", "-o", os.DevNull, "-nostdlib", "-shared"}} {
		out, err := exec.Command(cc, args...).Output()
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", cc, strings.Join(args, " "), err)
		}
		first, _, _ := strings.Cut(string(out), "\n")
		lines = append(lines, strings.TrimSpace(first))
	}
	return strings.Join(lines, "\n") + "\n", nil
}

func build(dir, out, tcFile string, symbols bool) error {
	cc := compiler()
	if _, err := exec.LookPath(cc); err != nil {
		return fmt.Errorf("no C compiler (%s): apt-get install gcc libc6-dev: %w", cc, err)
	}
	machine, err := exec.Command(cc, "-dumpmachine").Output()
	if err != nil {
		return fmt.Errorf("%s -dumpmachine: %w", cc, err)
	}
	if m := strings.TrimSpace(string(machine)); !strings.HasPrefix(m, "x86_64-") || !strings.Contains(m, "linux") {
		return fmt.Errorf("%s builds for %s: the interposer is amd64 Linux code (set CC to an x86_64 Linux compiler)", cc, m)
	}
	tc, err := toolchain(cc)
	if err != nil {
		return err
	}
	src, err := filepath.Abs(filepath.Join(dir, "c"))
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "uetrace-preload-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	obj := filepath.Join(tmp, "libuetrace-preload.so")
	args := append([]string{}, flags...)
	if symbols {
		args = slices.DeleteFunc(args, func(f string) bool { return f == "-s" })
	}
	args = append(args, "-ffile-prefix-map="+src+"=.", "-I", src, "-o", obj,
		filepath.Join(src, "preload.c"), filepath.Join(src, "asm_amd64.S"), "-Wl,--no-as-needed", "-l:libdl.so.2")
	cmd := exec.Command(cc, args...)
	cmd.Dir = tmp
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", cc, err, stderr.String())
	}
	b, err := os.ReadFile(obj)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return errors.New("the compiler wrote an empty object")
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(tcFile, []byte(tc), 0o644)
}
