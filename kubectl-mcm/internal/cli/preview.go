package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcmkit/mcm/deployment"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/preview"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/rollout"
)

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func runPreview(ctx context.Context, s Streams, args []string) error {
	fs, g := newFlags("preview", s.Out)
	var (
		file   string
		change preview.Change
		sets   stringList
	)
	fs.StringVar(&file, "filename", "", "a file with the proposed MachineDeployment (YAML or JSON; - reads stdin)")
	fs.StringVar(&file, "f", "", "shorthand for --filename")
	fs.StringVar(&change.Class, "class", "", "the class the machine template should use")
	fs.Var(&sets, "set", "PATH=VALUE: a field of the spec to change, e.g. template.spec.nodeTemplate.metadata.labels.pool=b (repeatable)")
	output := outputFlag(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	if err := exactly(pos, "DEPLOYMENT"); err != nil {
		return err
	}
	change.Sets = sets
	if file != "" {
		if change.File, err = readFile(s, file); err != nil {
			return err
		}
	}
	c, err := g.connect()
	if err != nil {
		return err
	}
	r := rolloutCmd{s: s, c: c, name: pos[0]}
	current, err := r.get(ctx)
	if err != nil {
		return err
	}
	proposed, err := preview.Propose(current, change)
	if err != nil {
		return err
	}
	machineSets, err := r.sets(ctx)
	if err != nil {
		return err
	}
	p, err := deployment.PreviewChange(current, proposed, rollout.Owned(current, machineSets))
	if err != nil {
		return fmt.Errorf("previewing: %w", err)
	}
	if *output != "" {
		return printObject(s.Out, *output, p)
	}
	_, err = fmt.Fprint(s.Out, preview.Render(current.Name, p))
	return err
}

func readFile(s Streams, name string) ([]byte, error) {
	if name == "-" {
		raw, err := io.ReadAll(s.In)
		if err != nil {
			return nil, fmt.Errorf("reading stdin: %w", err)
		}
		return raw, nil
	}
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading the proposed MachineDeployment: %w", err)
	}
	return raw, nil
}
