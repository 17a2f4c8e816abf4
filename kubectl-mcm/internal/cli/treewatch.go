package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/client/informers/externalversions"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/tree"
)

// Redrawing: at most every minRedraw, and on a terminal every second, so
// that ages move.
const (
	minRedraw = 250 * time.Millisecond
	ageTick   = time.Second
)

// clearScreen moves the cursor home and clears the screen (ANSI), so that
// each frame replaces the last.
const clearScreen = "\x1b[H\x1b[2J"

// watchTree draws the tree from informer caches whenever they change,
// until ctx ends. On a terminal each frame replaces the last; elsewhere
// (a file, a pipe) each changed tree is printed as a new block.
func watchTree(ctx context.Context, s Streams, c *clients, o treeOptions) error {
	if o.deployment != "" {
		if _, err := c.machines.MachineV1alpha1().MachineDeployments(c.namespace).Get(ctx, o.deployment, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("reading the MachineDeployment: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	mf := externalversions.NewSharedInformerFactoryWithOptions(c.machines, 0, externalversions.WithNamespace(c.namespace))
	tf := informers.NewSharedInformerFactory(c.target, 0)
	defer func() {
		cancel()
		mf.Shutdown()
		tf.Shutdown()
	}()
	src := cachedTree{
		deployments: mf.Machine().V1alpha1().MachineDeployments(),
		sets:        mf.Machine().V1alpha1().MachineSets(),
		machines:    mf.Machine().V1alpha1().Machines(),
		nodes:       tf.Core().V1().Nodes(),
		deployment:  o.deployment,
	}
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { notify() }, UpdateFunc: func(any, any) { notify() }, DeleteFunc: func(any) { notify() },
	}
	for _, inf := range []cache.SharedIndexInformer{src.deployments.Informer(), src.sets.Informer(), src.machines.Informer(), src.nodes.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("watching: %w", err)
		}
	}
	mf.Start(ctx.Done())
	tf.Start(ctx.Done())
	for typ, ok := range mf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the cache of %v did not sync: %w", typ, context.Cause(ctx))
		}
	}
	for typ, ok := range tf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the cache of %v did not sync: %w", typ, context.Cause(ctx))
		}
	}
	return redraw(ctx, s, src, o, changed)
}

// redraw draws a frame now and after every change (and tick on a
// terminal) until ctx ends.
func redraw(ctx context.Context, s Streams, src cachedTree, o treeOptions, changed <-chan struct{}) error {
	terminal := isTerminal(s.Out)
	opts := tree.RenderOptions{ShowAll: o.showAll, Color: useColor(s)}
	var tick <-chan time.Time
	if terminal {
		t := time.NewTicker(ageTick)
		defer t.Stop()
		tick = t.C
	}
	last := ""
	for {
		opts.Now = time.Now()
		objs, err := src.objects()
		if err != nil {
			return err
		}
		text := tree.Render(tree.Build(objs, opts.Now), opts)
		if err := drawFrame(s.Out, terminal, text, last); err != nil {
			return err
		}
		last = text
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(minRedraw):
		}
	}
}

func drawFrame(w io.Writer, terminal bool, text, last string) error {
	var err error
	switch {
	case terminal:
		_, err = fmt.Fprint(w, clearScreen+text)
	case text == last:
	case last == "":
		_, err = fmt.Fprint(w, text)
	default:
		_, err = fmt.Fprint(w, "\n"+text)
	}
	if err != nil {
		return fmt.Errorf("writing the tree: %w", err)
	}
	return nil
}

// cachedTree reads a tree's objects from informer caches.
type cachedTree struct {
	deployments machineinformers.MachineDeploymentInformer
	sets        machineinformers.MachineSetInformer
	machines    machineinformers.MachineInformer
	nodes       coreinformers.NodeInformer
	// deployment, when set, is the one deployment drawn.
	deployment string
}

// objects reads the caches; the objects are the caches' own, which Build
// only reads.
func (c cachedTree) objects() (tree.Objects, error) {
	var objs tree.Objects
	ds, err := c.deployments.Lister().List(labels.Everything())
	if err != nil {
		return objs, fmt.Errorf("listing MachineDeployments: %w", err)
	}
	for _, d := range ds {
		if c.deployment == "" || d.Name == c.deployment {
			objs.Deployments = append(objs.Deployments, d)
		}
	}
	if objs.Sets, err = c.sets.Lister().List(labels.Everything()); err != nil {
		return objs, fmt.Errorf("listing MachineSets: %w", err)
	}
	if objs.Machines, err = c.machines.Lister().List(labels.Everything()); err != nil {
		return objs, fmt.Errorf("listing Machines: %w", err)
	}
	nodes, err := c.nodes.Lister().List(labels.Everything())
	if err != nil {
		return objs, fmt.Errorf("listing Nodes: %w", err)
	}
	objs.Nodes = make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		objs.Nodes[n.Name] = n
	}
	if c.deployment != "" {
		objs = onlyDeployment(objs)
	}
	return objs, nil
}
