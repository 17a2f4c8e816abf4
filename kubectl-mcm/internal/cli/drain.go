package cli

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/drain"
	"github.com/mcmkit/mcm/kubectl-mcm/internal/explain"
)

func runDrain(ctx context.Context, s Streams, args []string) error {
	fs, g := newFlags("drain", s.Out)
	var (
		dryRun         bool
		timeout, grace time.Duration
	)
	fs.BoolVar(&dryRun, "dry-run", false, "show what the drain would do with each pod, and change nothing")
	fs.DurationVar(&timeout, "timeout", 0, "delete the pods left without the eviction API so that they are gone by then; 0 respects PodDisruptionBudgets forever")
	fs.DurationVar(&grace, "grace-period", 0, "the pods' termination grace period for evictions; 0 uses each pod's own")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, "NODE"); err != nil {
		return err
	}
	c, err := g.connect()
	if err != nil {
		return err
	}
	// Drain returns its last pass; the whole drain's evictions and
	// deletions are counted from the events.
	var evicted, deleted int
	d, err := drain.New(c.target, drain.Options{
		Timeout: timeout, GracePeriod: grace,
		OnEvent: func(e drain.Event) {
			switch e.Type {
			case drain.EventEvictionStarted:
				evicted++
			case drain.EventForceDeleted, drain.EventEvictRetriesExhausted:
				deleted++
			}
			fmt.Fprint(s.Out, explain.Event(e))
		},
	})
	if err != nil {
		return fmt.Errorf("the drain: %w", err)
	}
	plan, err := d.Plan(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("planning the drain of node %s: %w", pos[0], err)
	}
	fmt.Fprint(s.Out, explain.Plan(plan))
	if dryRun {
		return nil
	}
	if _, err := d.Drain(ctx, pos[0]); err != nil {
		return fmt.Errorf("draining: %w", err)
	}
	_, err = fmt.Fprintf(s.Out, "node/%s drained (%d evicted, %d deleted without eviction)\n", pos[0], evicted, deleted)
	return err
}

func runWhy(ctx context.Context, s Streams, args []string) error {
	fs, g := newFlags("why", s.Out)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := exactly(pos, "MACHINE"); err != nil {
		return err
	}
	c, err := g.connect()
	if err != nil {
		return err
	}
	m, err := c.machines.MachineV1alpha1().Machines(c.namespace).Get(ctx, pos[0], metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the Machine: %w", err)
	}
	st := explain.MachineState{Machine: m, NodeName: m.Labels[v1alpha1.NodeLabelKey]}
	if st.NodeName != "" {
		node, err := c.target.CoreV1().Nodes().Get(ctx, st.NodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading the machine's Node: %w", err)
		default:
			st.Node = node
		}
	}
	selector := fields.AndSelectors(fields.OneTermEqualSelector("involvedObject.name", m.Name),
		fields.OneTermEqualSelector("involvedObject.uid", string(m.UID))).String()
	evs, err := c.control.CoreV1().Events(c.namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return fmt.Errorf("listing the Machine's events: %w", err)
	}
	st.Events = evs.Items
	_, err = fmt.Fprint(s.Out, explain.Machine(st, time.Now()))
	return err
}
