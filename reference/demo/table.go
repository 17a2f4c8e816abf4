package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/reference/manager"
)

// row is one machine as the table shows it.
type row struct {
	name, phase, node string
	created           time.Time
}

// watch shows the machines' progress until ctx ends, the manager stops,
// or, with --exit-when-running, all are done.
func (d *demo) watch(ctx context.Context, managerDone <-chan error) error {
	done := v1alpha1.MachineRunning
	if d.cfg.TargetKubeconfig == manager.NoTarget {
		done = v1alpha1.MachineAvailable
	}
	tty := isTerminal(d.out)
	var deadline <-chan time.Time
	if d.opts.timeout > 0 {
		deadline = time.After(d.opts.timeout)
	}
	// The table reads a watch-fed cache: redrawn on every change, and once
	// a second for the AGE column; no List call per refresh.
	factory := externalversions.NewSharedInformerFactoryWithOptions(d.machines, 0,
		externalversions.WithNamespace(d.cfg.Namespace),
		externalversions.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = demoLabel + "=true" }))
	informer := factory.Machine().V1alpha1().Machines()
	lister := informer.Lister().Machines(d.cfg.Namespace)
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}); err != nil {
		return err
	}
	stopInformers := make(chan struct{})
	factory.Start(stopInformers)
	defer func() {
		close(stopInformers)
		factory.Shutdown()
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var (
		drawn     int                // lines of the table on screen (TTY)
		last      = map[string]row{} // last reported row per machine (no TTY, or after "all Running")
		announced bool
	)
	for {
		rows, err := listRows(lister)
		switch {
		case err != nil:
			d.printf("listing machines: %v\n", err)
		default:
			if tty && !announced {
				drawn = d.redraw(rows, drawn)
			} else {
				d.printChanges(rows, last)
			}
			if !announced && allPhase(rows, done, d.opts.machines) {
				announced = true
				d.printf("\nall demo machines %s\n", done)
				d.printf("Look around with:\n  %s --kubeconfig %s get mc -n %s\n", d.kubectl, d.cfg.ControlKubeconfig, d.cfg.Namespace)
				if d.cfg.TargetKubeconfig != manager.NoTarget {
					d.printf("  %s --kubeconfig %s get nodes\n", d.kubectl, d.cfg.TargetKubeconfig)
				}
				if d.opts.exitWhenRunning {
					return nil
				}
				d.printf("Press Ctrl-C to stop everything and remove the temp files.\n\n")
				for _, r := range rows {
					last[r.name] = r
				}
			}
		}
		select {
		case <-ctx.Done():
			d.printf("\nInterrupted.\n")
			return nil
		case err := <-managerDone:
			return fmt.Errorf("the manager stopped: %v", err)
		case <-deadline:
			return fmt.Errorf("the demo machines were not all %s within --demo-timeout=%v", done, d.opts.timeout)
		case <-tick.C:
		case <-changed:
		}
	}
}

// listRows reads the demo machines from the informer cache, sorted by name.
func listRows(lister machinelisters.MachineNamespaceLister) ([]row, error) {
	list, err := lister.List(labels.Everything()) // the informer selects the demo's machines
	if err != nil {
		return nil, err
	}
	rows := make([]row, 0, len(list))
	for _, m := range list {
		phase := string(m.Status.CurrentStatus.Phase)
		if m.DeletionTimestamp != nil && phase == "" {
			phase = "Terminating"
		}
		rows = append(rows, row{name: m.Name, phase: phase, node: m.Labels[v1alpha1.NodeLabelKey], created: m.CreationTimestamp.Time})
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.name, b.name) })
	return rows, nil
}

func allPhase(rows []row, phase v1alpha1.MachinePhase, want int) bool {
	if len(rows) < want {
		return false
	}
	for _, r := range rows {
		if r.phase != string(phase) {
			return false
		}
	}
	return true
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// redraw replaces the previous table (drawn lines) with the current one
// and returns its height.
func (d *demo) redraw(rows []row, drawn int) int {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPHASE\tNODE\tAGE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.name, dash(r.phase), dash(r.node), age(r.created))
	}
	_ = tw.Flush()
	if drawn > 0 {
		fmt.Fprintf(d.out, "\x1b[%dA\x1b[J", drawn) // cursor up, clear to the end
	}
	_, _ = d.out.Write(buf.Bytes())
	return bytes.Count(buf.Bytes(), []byte("\n"))
}

// printChanges prints one line per machine whose phase or node changed.
func (d *demo) printChanges(rows []row, last map[string]row) {
	for _, r := range rows {
		prev, seen := last[r.name]
		if seen && prev.phase == r.phase && prev.node == r.node {
			continue
		}
		last[r.name] = r
		d.printf("%s  %-10s phase=%-12s node=%-10s age=%s\n", time.Now().Format("15:04:05"), r.name, dash(r.phase), dash(r.node), age(r.created))
	}
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
