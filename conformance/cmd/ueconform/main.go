// Command ueconform runs differential conformance scenarios (see
// conformance/README.md) against Linux's user_events and uetrace's.
//
//	ueconform -backend kernel|daemon|daemon-ring|inprocess|fuse [-socket PATH] [-uetrace PATH] SCENARIO...
//	ueconform -all [-kernel-results FILE] [-save-kernel FILE] [-known FILE] SCENARIO...
//
// The first form runs scenario files or directories on one backend and
// prints normalised results. The second runs them on the kernel (in the VM
// of kernel/vmtest, or from saved results), the daemon (socket and ring
// transports), in-process subsys and uetrace's FUSE tree (the kernel
// backend's driver under `uetrace run --private`; root only, skipped with
// the reason otherwise), prints every difference, and ends with
// "conformance: N/N scenarios identical" and each backend's count; it
// fails when a difference is not in the known-differences file.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/uetrace/uetrace/conformance/harness"
)

func main() {
	backend := flag.String("backend", "", "run on one backend: kernel, daemon, daemon-ring, inprocess or fuse")
	socket := flag.String("socket", "", "daemon backend: a running daemon's socket (default: start one)")
	uetrace := flag.String("uetrace", "", "fuse backend: the uetrace binary whose `run --private` serves the tree (default: build it)")
	child := flag.Bool("child", false, "internal: run scenario text from stdin as this process")
	all := flag.Bool("all", false, "compare the kernel with the daemon (socket and ring transports), in-process and FUSE")
	kernelResults := flag.String("kernel-results", "", "-all: kernel results saved earlier, instead of booting the VM")
	saveKernel := flag.String("save-kernel", "", "-all: write the kernel's results to this file")
	known := flag.String("known", "conformance/known-differences.txt", "-all: the known differences")
	out := flag.String("o", "", "write results to this file instead of stdout")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: ueconform -backend B [-socket S] SCENARIO...\n       ueconform -all [flags] SCENARIO...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	opts := harness.Options{Backend: *backend, Socket: *socket, Uetrace: *uetrace}

	if *child {
		if err := harness.RunChild(opts, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "ueconform:", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *all {
		os.Exit(differential(flag.Args(), *kernelResults, *saveKernel, *known))
	}
	scenarios, err := harness.Load(flag.Args()...)
	if err != nil {
		fatal(err)
	}
	w := os.Stdout
	if *out != "" {
		if w, err = os.Create(*out); err != nil {
			fatal(err)
		}
	}
	if err := harness.Run(opts, scenarios, w); err != nil {
		fatal(err)
	}
	if err := w.Close(); err != nil && *out != "" {
		fatal(err)
	}
}

func differential(dirs []string, kernelResults, saveKernel, knownPath string) int {
	known, err := harness.LoadKnown(knownPath)
	if err != nil {
		fatal(err)
	}
	for _, b := range harness.Backends {
		if err := harness.Unavailable(b); err != nil {
			fmt.Printf("backend %s skipped: %v\n", b, err)
		}
	}
	kernel, backends, err := harness.Differential(context.Background(), dirs, kernelResults)
	if err != nil {
		fatal(err)
	}
	if saveKernel != "" {
		var b bytes.Buffer
		for _, n := range kernel.Names {
			fmt.Fprintf(&b, "=== %s\n%s", n, kernel.Text[n])
		}
		if err := os.WriteFile(saveKernel, b.Bytes(), 0o644); err != nil {
			fatal(err)
		}
	}
	rep := harness.Compare(kernel, backends, known)
	fmt.Print(rep.Diffs.String())
	for _, k := range rep.Known {
		fmt.Println("known difference:", k)
	}
	for _, s := range rep.Stale {
		fmt.Println("no longer differs (remove it from the known differences):", s)
	}
	for _, m := range rep.Missing {
		fmt.Println("no result:", m)
	}
	if len(rep.Unknown) > 0 {
		fmt.Printf("differences not in %s:\n  %s\n", knownPath, strings.Join(rep.Unknown, "\n  "))
	}
	fmt.Println(rep.Summary())
	if !rep.OK() {
		return 1
	}
	return 0
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "ueconform:", err)
	os.Exit(1)
}
