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

// watch shows the machines' progress until ctx ends, the manager stops,
// or, with --exit-when-running, the rollout is complete. Once all machines
// are up it starts the rollout and fails if available machines drop below
// the floor the strategy promises.
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
	// The table reads watch-fed caches: redrawn on every change, and once a
	// second for the AGE column; no List call per refresh. The floor check
	// counts on every event of the same informer.
	factory := externalversions.NewSharedInformerFactoryWithOptions(d.machines, 0,
		externalversions.WithNamespace(d.cfg.Namespace),
		externalversions.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = demoLabel + "=true" }))
	machines := factory.Machine().V1alpha1().Machines()
	sets := factory.Machine().V1alpha1().MachineSets()
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	floor := newFloorCheck(done)
	if _, err := machines.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { floor.observe(obj, false); notify() },
		UpdateFunc: func(_, obj any) { floor.observe(obj, false); notify() },
		DeleteFunc: func(obj any) { floor.observe(obj, true); notify() },
	}); err != nil {
		return err
	}
	if _, err := sets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
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
		st        = bootingV1
		drawn     int                // lines of the block on screen (TTY)
		last      = map[string]row{} // last reported row per machine (no TTY, or once finished)
		line      string             // last reported rollout line (no TTY)
		p         progress
		rollStart time.Time
	)
	for {
		rows, err := listRows(machines.Lister().Machines(d.cfg.Namespace))
		var setRows []setRow
		if err == nil {
			setRows, err = listSets(sets.Lister().MachineSets(d.cfg.Namespace))
		}
		switch {
		case err != nil:
			d.printf("reading the cache: %v\n", err)
		case st == bootingV1:
			if tty {
				drawn = d.redraw("", rows, drawn)
			} else {
				d.printChanges(rows, last)
			}
			if allPhase(rows, done, d.opts.machines) && floor.armAt(d.opts.machines) {
				d.printf("\n%d/%d demo machines %s; rolling them over to MachineClass %s.\n", len(rows), d.opts.machines, done, classV2)
				if err := d.startRollout(ctx); err != nil {
					return err
				}
				st, drawn, rollStart = rolling, 0, time.Now()
			}
		case st == rolling:
			p = rolloutProgress(setRows, rows, done, d.opts.machines)
			if tty {
				drawn = d.redraw("rollout: "+p.String(), rows, drawn)
			} else {
				if s := p.String(); s != line {
					line = s
					d.printf("%s  rollout: %s\n", time.Now().Format("15:04:05"), s)
				}
				d.printChanges(rows, last)
			}
			lowest, available := floor.counts()
			if lowest < p.floor {
				return fmt.Errorf("available (%s) machines dropped to %d during the rollout, below the floor of %d (replicas %d - maxUnavailable %d); now %s",
					done, lowest, p.floor, d.opts.machines, maxUnavailable, p)
			}
			// Complete once the events, too, have got there: none left
			// unchecked.
			if p.complete && available >= d.opts.machines {
				d.printf("\nrollout complete in %v: new set %s %d/%d %s, old set at 0 with no machines left; available never below %d (floor %d)\n",
					time.Since(rollStart).Round(time.Second), p.new.name, d.opts.machines, d.opts.machines, done, lowest, p.floor)
				d.printHints()
				if d.opts.exitWhenRunning {
					return nil
				}
				d.printf("Press Ctrl-C to stop everything and remove the temp files.\n\n")
				st, deadline = finished, nil // the timeout is for getting here
				for _, r := range rows {
					last[r.name] = r
				}
			}
		default:
			d.printChanges(rows, last)
		}
		select {
		case <-ctx.Done():
			d.printf("\nInterrupted.\n")
			return nil
		case err := <-managerDone:
			return fmt.Errorf("%w: %v", errManagerStopped, err)
		case <-deadline:
			if st == bootingV1 {
				return fmt.Errorf("the demo machines were not all %s within --demo-timeout=%v", done, d.opts.timeout)
			}
			return fmt.Errorf("the rollout did not complete within --demo-timeout=%v: %s", d.opts.timeout, p)
		case <-tick.C:
		case <-changed:
		}
	}
}

// printHints prints the commands to look around with.
func (d *demo) printHints() {
	d.printf("Look around with:\n  %s --kubeconfig %s get mcd,mcs,mc -n %s\n", d.kubectl, d.cfg.ControlKubeconfig, d.cfg.Namespace)
	if d.cfg.TargetKubeconfig != manager.NoTarget {
		d.printf("  %s --kubeconfig %s get nodes\n", d.kubectl, d.cfg.TargetKubeconfig)
	}
}
