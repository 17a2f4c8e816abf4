package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// globals are the flags every command takes, named as kubectl names them.
type globals struct {
	kubeconfig, context, namespace, targetKubeconfig string
}

// valueFlags are the global flags that take a value, which splitCommand
// must not take for the command.
func valueFlags() []string {
	return []string{"kubeconfig", "context", "n", "namespace", "target-kubeconfig", "o", "output"}
}

// newFlags makes a command's flag set with the global flags. Parse errors
// are returned, not printed; -h prints the flags to out.
func newFlags(name string, out io.Writer) (*flag.FlagSet, *globals) {
	fs := flag.NewFlagSet("kubectl mcm "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
		fs.SetOutput(out)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	g := &globals{}
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "path to the kubeconfig file of the control cluster")
	fs.StringVar(&g.context, "context", "", "the kubeconfig context to use")
	fs.StringVar(&g.namespace, "namespace", "", "the namespace of the machines (default: the context's)")
	fs.StringVar(&g.namespace, "n", "", "shorthand for --namespace")
	fs.StringVar(&g.targetKubeconfig, "target-kubeconfig", "", "path to the kubeconfig file of the nodes' cluster (default: the control cluster)")
	return fs, g
}

// outputFlag adds -o/--output to a command that lists.
func outputFlag(fs *flag.FlagSet) *string {
	out := new(string)
	fs.StringVar(out, "output", "", "output format: json or yaml (default: text)")
	fs.StringVar(out, "o", "", "shorthand for --output")
	return out
}

func checkOutput(format string) error {
	switch format {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,yaml", format)
}

// parse parses args into fs with flags and arguments mixed, as kubectl
// allows ("tree web -n shop"), and returns the arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%s: %w", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// exactly checks the number of arguments a command got.
func exactly(args []string, names ...string) error {
	if len(args) != len(names) {
		return fmt.Errorf("expected %s, got %d argument(s): %q", strings.Join(names, " "), len(args), args)
	}
	return nil
}
