package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Streams are the plugin's standard streams and environment, given by the
// caller so that tests can drive it.
type Streams struct {
	In          io.Reader
	Out, ErrOut io.Writer
	// Getenv reads the environment (NO_COLOR); nil reads nothing.
	Getenv func(string) string
}

func (s Streams) getenv(key string) string {
	if s.Getenv == nil {
		return ""
	}
	return s.Getenv(key)
}

// command is one subcommand: its name, a line of help, and its run, which
// parses its own flags (the global ones included) from args.
type command struct {
	name, args, help string
	run              func(ctx context.Context, s Streams, args []string) error
}

func commands() []command {
	return []command{
		{"tree", "[DEPLOYMENT] [-w] [--show-all] [-o json|yaml]", "deployments → sets → machines → nodes, and what each machine does now", runTree},
		{"rollout", "status|history|undo|pause|resume|restart DEPLOYMENT", "manage a MachineDeployment's rollout, as kubectl rollout does for Deployments", runRollout},
		{"preview", "DEPLOYMENT (-f FILE | --class NAME | --set PATH=VALUE...)", "what a change of a MachineDeployment would do to its machines, without applying it", runPreview},
		{"drain", "NODE [--dry-run] [--timeout D] [--grace-period D]", "drain a node with the drain engine, showing each pod's decision", runDrain},
		{"why", "MACHINE", "a machine's state explained from its status, events, drain and node", runWhy},
	}
}

// Main runs the plugin with args (without the program name) and returns
// its exit code: 0 on success, 1 on an error, which is printed to
// s.ErrOut as "error: ...", as kubectl does.
func Main(ctx context.Context, args []string, s Streams) int {
	name, rest := splitCommand(args)
	if name == "" || name == "help" {
		usage(s.Out)
		if name == "" && len(args) > 0 && !slices.Contains(args, "-h") && !slices.Contains(args, "--help") {
			fmt.Fprintf(s.ErrOut, "error: no command in %q\n", strings.Join(args, " "))
			return 1
		}
		return 0
	}
	i := slices.IndexFunc(commands(), func(c command) bool { return c.name == name })
	if i < 0 {
		fmt.Fprintf(s.ErrOut, "error: unknown command %q for \"kubectl mcm\"\n", name)
		return 1
	}
	if err := commands()[i].run(ctx, s, rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(s.ErrOut, "error: %v\n", err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kubectl mcm: machines of the machine-controller-manager API (machine.sapcloud.io/v1alpha1), seen and managed as kubectl does built-in kinds.")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n           %s\n", c.name, c.args, c.help)
	}
	fmt.Fprintln(w, "\nEvery command takes --kubeconfig, --context, -n/--namespace (the control cluster: machines)")
	fmt.Fprintln(w, "and --target-kubeconfig (the nodes' cluster; default: the same). Run \"kubectl mcm COMMAND -h\" for its flags.")
}

// splitCommand finds the command: the first argument that is not a flag
// nor the value of a global flag written as "-n ns".
func splitCommand(args []string) (string, []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a, slices.Concat(args[:i], args[i+1:])
		}
		if name := strings.TrimLeft(a, "-"); !strings.Contains(name, "=") && slices.Contains(valueFlags(), name) {
			i++
		}
	}
	return "", args
}

// isTerminal tells whether w is a terminal, the only place for colour and
// redrawing in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// useColor is isTerminal, unless NO_COLOR (https://no-color.org) is set.
func useColor(s Streams) bool {
	return isTerminal(s.Out) && s.getenv("NO_COLOR") == ""
}
