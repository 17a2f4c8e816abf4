package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/informers/externalversions"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	"github.com/mcmkit/mcm/reference/manager"
)

// errManagerStopped: the manager ended while the demo watched, so nothing
// removes the finalizers of what the demo would delete.
var errManagerStopped = errors.New("the manager stopped")

// stage is how far the demo has got.
type stage int

const (
	bootingV1 stage = iota // the deployment's first machines coming up
	rolling                // the rollout to classV2
	finished               // rolled out; showing changes until Ctrl-C
)

// watcher is what the demo watches its machines with, and how far it has
// got showing them.
type watcher struct {
	done     v1alpha1.MachinePhase // the phase the demo waits for
	tty      bool
	machines machineinformers.MachineInformer
	sets     machineinformers.MachineSetInformer
	floor    *floorCheck
	changed  chan struct{} // a machine or set changed

	st        stage
	drawn     int            // lines of the block on screen (TTY)
	last      map[string]row // last reported row per machine (no TTY, or once finished)
	line      string         // last reported rollout line (no TTY)
	p         progress       // of the rollout
	rollStart time.Time
}

// watch shows the machines' progress until ctx ends, the manager stops,
// or, with --exit-when-running, the rollout is complete. Once all machines
// are up it starts the rollout and fails if available machines drop below
// the floor the strategy promises.
func (d *demo) watch(ctx context.Context, managerDone <-chan error) error {
	w, stop, err := d.startWatching()
	if err != nil {
		return err
	}
	defer stop()
	var deadline <-chan time.Time
	if d.opts.timeout > 0 {
		deadline = time.After(d.opts.timeout)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if over, err := d.show(ctx, w); over || err != nil {
			return err
		}
		if w.st == finished {
			deadline = nil // the timeout is for getting here
		}
		select {
		case <-ctx.Done():
			d.printf("\nInterrupted.\n")
			return nil
		case err := <-managerDone:
			return fmt.Errorf("%w: %v", errManagerStopped, err)
		case <-deadline:
			if w.st == bootingV1 {
				return fmt.Errorf("the demo machines were not all %s within --demo-timeout=%v", w.done, d.opts.timeout)
			}
			return fmt.Errorf("the rollout did not complete within --demo-timeout=%v: %s", d.opts.timeout, w.p)
		case <-tick.C:
		case <-w.changed:
		}
	}
}

// startWatching starts the informers of the demo's machines and sets; stop
// stops them. The table reads their watch-fed caches: redrawn on every
// change, and once a second for the AGE column; no List call per refresh.
// The floor check counts on every event of the same informer.
func (d *demo) startWatching() (w *watcher, stop func(), err error) {
	w = &watcher{done: v1alpha1.MachineRunning, tty: isTerminal(d.out), changed: make(chan struct{}, 1), last: map[string]row{}}
	if d.cfg.TargetKubeconfig == manager.NoTarget {
		w.done = v1alpha1.MachineAvailable
	}
	factory := externalversions.NewSharedInformerFactoryWithOptions(d.machines, 0,
		externalversions.WithNamespace(d.cfg.Namespace),
		externalversions.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = demoLabel + "=true" }))
	w.machines = factory.Machine().V1alpha1().Machines()
	w.sets = factory.Machine().V1alpha1().MachineSets()
	notify := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	w.floor = newFloorCheck(w.done)
	if _, err := w.machines.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.floor.observe(obj, false); notify() },
		UpdateFunc: func(_, obj any) { w.floor.observe(obj, false); notify() },
		DeleteFunc: func(obj any) { w.floor.observe(obj, true); notify() },
	}); err != nil {
		return nil, nil, err
	}
	if _, err := w.sets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}); err != nil {
		return nil, nil, err
	}
	stopInformers := make(chan struct{})
	factory.Start(stopInformers)
	return w, func() {
		close(stopInformers)
		factory.Shutdown()
	}, nil
}

// show shows the machines as the caches have them now, and moves the demo
// on: the rollout starts once every machine is up, and is checked against
// the floor until it completes. over: the demo is done.
func (d *demo) show(ctx context.Context, w *watcher) (over bool, err error) {
	rows, err := listRows(w.machines.Lister().Machines(d.cfg.Namespace))
	var setRows []setRow
	if err == nil {
		setRows, err = listSets(w.sets.Lister().MachineSets(d.cfg.Namespace))
	}
	switch {
	case err != nil:
		d.printf("reading the cache: %v\n", err)
	case w.st == bootingV1:
		if w.tty {
			w.drawn = d.redraw("", rows, w.drawn)
		} else {
			d.printChanges(rows, w.last)
		}
		if allPhase(rows, w.done, d.opts.machines) && w.floor.armAt(d.opts.machines) {
			d.printf("\n%d/%d demo machines %s; rolling them over to MachineClass %s.\n", len(rows), d.opts.machines, w.done, classV2)
			if err := d.startRollout(ctx); err != nil {
				return true, err
			}
			w.st, w.drawn, w.rollStart = rolling, 0, time.Now()
		}
	case w.st == rolling:
		return d.showRollout(w, rows, setRows)
	default:
		d.printChanges(rows, w.last)
	}
	return false, nil
}

// showRollout shows the rollout's progress, fails it if available machines
// dropped below the floor, and finishes the demo's watch once it is
// complete.
func (d *demo) showRollout(w *watcher, rows []row, setRows []setRow) (over bool, err error) {
	w.p = rolloutProgress(setRows, rows, w.done, d.opts.machines)
	if w.tty {
		w.drawn = d.redraw("rollout: "+w.p.String(), rows, w.drawn)
	} else {
		if s := w.p.String(); s != w.line {
			w.line = s
			d.printf("%s  rollout: %s\n", time.Now().Format("15:04:05"), s)
		}
		d.printChanges(rows, w.last)
	}
	lowest, available := w.floor.counts()
	if lowest < w.p.floor {
		return true, fmt.Errorf("available (%s) machines dropped to %d during the rollout, below the floor of %d (replicas %d - maxUnavailable %d); now %s",
			w.done, lowest, w.p.floor, d.opts.machines, maxUnavailable, w.p)
	}
	// Complete once the events, too, have got there: none left unchecked.
	if !w.p.complete || available < d.opts.machines {
		return false, nil
	}
	d.printf("\nrollout complete in %v: new set %s %d/%d %s, old set at 0 with no machines left; available never below %d (floor %d)\n",
		time.Since(w.rollStart).Round(time.Second), w.p.new.name, d.opts.machines, d.opts.machines, w.done, lowest, w.p.floor)
	d.printHints()
	if d.opts.exitWhenRunning {
		return true, nil
	}
	d.printf("Press Ctrl-C to stop everything and remove the temp files.\n\n")
	w.st = finished
	for _, r := range rows {
		w.last[r.name] = r
	}
	return false, nil
}

// printHints prints the commands to look around with.
func (d *demo) printHints() {
	d.printf("Look around with:\n  %s --kubeconfig %s get mcd,mcs,mc -n %s\n", d.kubectl, d.cfg.ControlKubeconfig, d.cfg.Namespace)
	target := ""
	if d.cfg.TargetKubeconfig != manager.NoTarget {
		d.printf("  %s --kubeconfig %s get nodes\n", d.kubectl, d.cfg.TargetKubeconfig)
		target = " --target-kubeconfig " + d.cfg.TargetKubeconfig
	}
	// The kubectl plugin (kubectl-mcm/), which kubectl finds on the PATH;
	// kubectl passes a plugin only the flags after its name.
	d.printf("With the kubectl plugin (go install ./kubectl-mcm):\n")
	for _, cmd := range []string{"tree -w", "rollout history " + deploymentName, "rollout status " + deploymentName,
		"preview " + deploymentName + " --class " + classV1} {
		d.printf("  %s mcm --kubeconfig %s -n %s%s %s\n", d.kubectl, d.cfg.ControlKubeconfig, d.cfg.Namespace, target, cmd)
	}
}
