package main

import (
	"slices"
	"strings"
	"testing"
)

// positional is what cobra hands write's RunE for args, after dataArgs.
func positional(t *testing.T, args []string) []string {
	root := newRootCmd()
	cmd, rest, err := root.Find(dataArgs(root, args))
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	if cmd.Name() != args[0] {
		t.Fatalf("%q: found %s", args, cmd.Name())
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return nil
	}
	return cmd.Flags().Args()
}

func TestDataArgs(t *testing.T) {
	for _, tc := range []struct {
		args, want []string
	}{
		{[]string{"write", "dynamic_events", "-:myev"}, []string{"dynamic_events", "-:myev"}},
		{[]string{"write", "dynamic_events", "--", "-:myev"}, []string{"dynamic_events", "-:myev"}},
		{[]string{"write", "--", "dynamic_events", "-:myev"}, []string{"dynamic_events", "-:myev"}},
		{[]string{"write", "--trunc", "trace", ""}, []string{"trace", ""}},
		{[]string{"write", "dynamic_events", "-:myev", "--socket", "/s"}, []string{"dynamic_events", "-:myev"}},
		{[]string{"write", "dynamic_events", "--", "--"}, []string{"dynamic_events", "--"}},
		{[]string{"write", "x/enable", "-1"}, []string{"x/enable", "-1"}},
		{[]string{"emit", "-x u32 a", "--field", "a=-1"}, []string{"-x u32 a"}},
		{[]string{"emit", "e u32 a", "--field", "-a"}, []string{"e u32 a"}},
		{[]string{"enable", "-a", "-b"}, []string{"-a", "-b"}},
		{[]string{"write", "dynamic_events", "--:x"}, []string{"dynamic_events", "--:x"}},
		{[]string{"write", "dynamic_events", "--x u32 a"}, []string{"dynamic_events", "--x u32 a"}},
		{[]string{"write", "dynamic_events", "--trunc", "u:x"}, []string{"dynamic_events", "u:x"}},
		{[]string{"write", "--nosuch", "dynamic_events", "u:x"}, nil}, // a misspelt flag before the data
	} {
		if got := positional(t, tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("%q: positional %q, want %q", tc.args, got, tc.want)
		}
	}
	// Flags are still flags, wherever they are.
	root := newRootCmd()
	out := dataArgs(root, []string{"--backend", "daemon", "write", "-:x", "--trunc", "dynamic_events"})
	if want := []string{"write", "--backend", "daemon", "--trunc", "--", "-:x", "dynamic_events"}; !slices.Equal(out, want) {
		t.Errorf("rewritten %q, want %q", out, want)
	}
	// Other commands are left alone.
	in := []string{"record", "-e", "x", "--", "sh", "-c", "exit 3"}
	if out := dataArgs(newRootCmd(), in); !slices.Equal(out, in) {
		t.Errorf("record rewritten: %q", out)
	}
}

// Any text after "--", and any text that is not one of write's flags,
// reaches write as it was given.
func FuzzDataArgs(f *testing.F) {
	for _, s := range []string{"-:myev", "-:a u32 x; u32 y", "!u:x", "-1", "--", "-", "", "-h", "--trunc", "-:x\n-:y", "--socket=x", "-qz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		want := []string{"dynamic_events", text}
		if got := positional(t, []string{"write", "dynamic_events", "--", text}); !slices.Equal(got, want) {
			t.Errorf("after --: %q, want %q", got, want)
		}
		root := newRootCmd()
		cmd, _, _ := root.Find([]string{"write"})
		cmd.InitDefaultHelpFlag()
		fs := cmd.Flags()
		fs.AddFlagSet(cmd.InheritedFlags())
		// After PATH, only write's own flags are flags: a single-dash
		// cluster of its shorthands, or a "--name" it has.
		_, isFlag := flagArgs(fs, text)
		if strings.HasPrefix(text, "--") && text != "--" {
			isFlag = knownLong(fs, text)
		}
		if isFlag || text == "--" {
			return
		}
		if got := positional(t, []string{"write", "dynamic_events", text}); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
		if strings.HasPrefix(text, "-:") || strings.HasPrefix(text, "!") {
			// The kernel's delete lines are never flags.
			if got := positional(t, []string{"write", "dynamic_events", text, "--trunc"}); !slices.Equal(got, want) {
				t.Errorf("%q with a flag after: %q, want %q", text, got, want)
			}
		}
	})
}
