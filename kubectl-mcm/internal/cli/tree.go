package cli

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/tree"
)

type treeOptions struct {
	deployment string
	watch      bool
	showAll    bool
	output     string
}

func runTree(ctx context.Context, s Streams, args []string) error {
	fs, g := newFlags("tree", s.Out)
	var o treeOptions
	fs.BoolVar(&o.watch, "watch", false, "after drawing the tree, redraw it whenever something changes")
	fs.BoolVar(&o.watch, "w", false, "shorthand for --watch")
	fs.BoolVar(&o.showAll, "show-all", false, "list every machine instead of grouping alike ones")
	out := outputFlag(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	o.output = *out
	if err := checkOutput(o.output); err != nil {
		return err
	}
	if len(rest) > 1 {
		return fmt.Errorf("expected at most one MachineDeployment, got %q", rest)
	}
	if len(rest) == 1 {
		o.deployment = rest[0]
	}
	if o.watch && o.output != "" {
		return fmt.Errorf("--watch draws text; it cannot be combined with -o %s", o.output)
	}
	c, err := g.connect()
	if err != nil {
		return err
	}
	if o.watch {
		return watchTree(ctx, s, c, o)
	}
	objs, err := listObjects(ctx, c, o.deployment)
	if err != nil {
		return err
	}
	now := time.Now()
	t := tree.Build(objs, now)
	if o.output != "" {
		return printObject(s.Out, o.output, t)
	}
	_, err = fmt.Fprint(s.Out, tree.Render(t, tree.RenderOptions{Now: now, ShowAll: o.showAll, Color: useColor(s)}))
	return err
}

// listObjects reads the namespace's deployments, sets and machines and the
// target cluster's nodes; with a deployment name, only that deployment's.
func listObjects(ctx context.Context, c *clients, deployment string) (tree.Objects, error) {
	api := c.machines.MachineV1alpha1()
	var objs tree.Objects
	if deployment != "" {
		d, err := api.MachineDeployments(c.namespace).Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			return objs, fmt.Errorf("reading the MachineDeployment: %w", err)
		}
		objs.Deployments = []*v1alpha1.MachineDeployment{d}
	} else {
		ds, err := api.MachineDeployments(c.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return objs, fmt.Errorf("listing MachineDeployments: %w", err)
		}
		for i := range ds.Items {
			objs.Deployments = append(objs.Deployments, &ds.Items[i])
		}
	}
	sets, err := api.MachineSets(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return objs, fmt.Errorf("listing MachineSets: %w", err)
	}
	for i := range sets.Items {
		objs.Sets = append(objs.Sets, &sets.Items[i])
	}
	machines, err := api.Machines(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return objs, fmt.Errorf("listing Machines: %w", err)
	}
	for i := range machines.Items {
		objs.Machines = append(objs.Machines, &machines.Items[i])
	}
	nodes, err := c.target.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return objs, fmt.Errorf("listing the target cluster's Nodes: %w", err)
	}
	objs.Nodes = map[string]*corev1.Node{}
	for i := range nodes.Items {
		objs.Nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	if deployment != "" {
		objs = onlyDeployment(objs)
	}
	return objs, nil
}

// onlyDeployment keeps, of objs, the sets objs.Deployments own and their
// machines.
func onlyDeployment(objs tree.Objects) tree.Objects {
	deployments := map[types.UID]bool{}
	for _, d := range objs.Deployments {
		deployments[d.UID] = true
	}
	sets := map[types.UID]bool{}
	out := tree.Objects{Deployments: objs.Deployments, Nodes: objs.Nodes}
	for _, s := range objs.Sets {
		if ref := metav1.GetControllerOf(s); ref != nil && deployments[ref.UID] {
			out.Sets = append(out.Sets, s)
			sets[s.UID] = true
		}
	}
	for _, m := range objs.Machines {
		if ref := metav1.GetControllerOf(m); ref != nil && sets[ref.UID] {
			out.Machines = append(out.Machines, m)
		}
	}
	return out
}
