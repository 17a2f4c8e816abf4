package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		name     string
		rest     []string
		describe string
	}{
		{[]string{"tree", "web"}, "tree", []string{"web"}, "command first"},
		{[]string{"-n", "shop", "tree", "web"}, "tree", []string{"-n", "shop", "web"}, "a global flag's value is not the command"},
		{[]string{"--namespace=shop", "rollout", "status", "web"}, "rollout", []string{"--namespace=shop", "status", "web"}, "flag=value"},
		{[]string{"--kubeconfig", "/k", "-w", "tree"}, "tree", []string{"--kubeconfig", "/k", "-w"}, "a bool flag takes no value"},
		{[]string{"-n", "shop"}, "", []string{"-n", "shop"}, "no command"},
		{nil, "", nil, "nothing"},
	} {
		name, rest := splitCommand(tc.args)
		if name != tc.name || !cmp.Equal(rest, tc.rest) {
			t.Errorf("%s: splitCommand(%q) = %q, %q; want %q, %q", tc.describe, tc.args, name, rest, tc.name, tc.rest)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	fs, g := newFlags("tree", &bytes.Buffer{})
	watch := fs.Bool("w", false, "")
	out := outputFlag(fs)
	pos, err := parse(fs, []string{"web", "-n", "shop", "-w", "--context", "prod", "-o", "yaml", "extra"})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{strings.Join(pos, ","), g.namespace, g.context, *out}
	if diff := cmp.Diff([]string{"web,extra", "shop", "prod", "yaml"}, got); diff != "" || !*watch {
		t.Errorf("parse (-want +got):\n%s watch=%v", diff, *watch)
	}
	if _, err := parse(fs, []string{"--no-such-flag"}); err == nil || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("an unknown flag: err = %v", err)
	}
}

// TestMainExitCodes checks the exit codes and the error format without a
// cluster: everything here fails before a client is needed.
func TestMainExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		stdout   string
		stderr   string
		describe string
	}{
		{nil, 0, "Commands:", "", "usage"},
		{[]string{"help"}, 0, "rollout", "", "help"},
		{[]string{"frobnicate"}, 1, "", `error: unknown command "frobnicate" for "kubectl mcm"`, "unknown command"},
		{[]string{"tree", "-o", "wide"}, 1, "", `error: unable to match a printer suitable for the output format "wide"`, "bad -o"},
		{[]string{"tree", "a", "b"}, 1, "", "error: expected at most one MachineDeployment", "two deployments"},
		{[]string{"tree", "-w", "-o", "json"}, 1, "", "error: --watch draws text", "-w with -o"},
		{[]string{"rollout"}, 1, "", "error: expected a rollout command", "rollout without a command"},
		{[]string{"rollout", "rewind", "web"}, 1, "", `error: unknown rollout command "rewind"`, "unknown rollout command"},
		{[]string{"rollout", "status"}, 1, "", "error: expected DEPLOYMENT, got 0 argument(s)", "no deployment"},
		{[]string{"drain"}, 1, "", "error: expected NODE", "no node"},
		{[]string{"why", "a", "b"}, 1, "", "error: expected MACHINE, got 2", "two machines"},
		{[]string{"tree", "-h"}, 0, "-show-all", "", "command help"},
		{[]string{"tree", "--kubeconfig", "/does/not/exist"}, 1, "", "error: loading the kubeconfig", "missing kubeconfig"},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), tc.args, Streams{Out: &out, ErrOut: &errOut})
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.HasPrefix(errOut.String(), tc.stderr) {
			t.Errorf("%s: Main(%q) = %d, stdout %q, stderr %q; want %d, stdout with %q, stderr starting %q",
				tc.describe, tc.args, code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}

func TestColourOnlyOnATerminal(t *testing.T) {
	if useColor(Streams{Out: &bytes.Buffer{}}) {
		t.Error("colour on a buffer")
	}
}
