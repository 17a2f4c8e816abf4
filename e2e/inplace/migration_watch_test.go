package inplace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/e2e/simstack"
)

// watchOwnership watches the namespace's machines and sets until t ends
// and returns a function that lists what it saw go wrong: a machine
// created, deleted or marked for deletion, a machine with another UID
// than in uids, a machine with more than one MachineSet owner or
// controller, a set created.
func watchOwnership(t *testing.T, s *simstack.Stack, uids map[string]types.UID) func() []string {
	t.Helper()
	var mu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	ctx, cancel := context.WithCancel(context.Background())
	machines, err := s.Machines.MachineV1alpha1().Machines(s.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sets, err := s.Machines.MachineV1alpha1().MachineSets(s.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev := range machines.ResultChan() {
			if m, ok := ev.Object.(*v1alpha1.Machine); ok {
				checkMachine(m, ev.Type, uids, report)
			}
		}
	}()
	known := map[string]bool{}
	go func() {
		defer wg.Done()
		for ev := range sets.ResultChan() {
			set, ok := ev.Object.(*v1alpha1.MachineSet)
			if !ok {
				continue
			}
			// The watch starts with an ADDED event per existing set: the
			// old set and MCM's new one.
			if ev.Type == watch.Added && !known[set.Name] && len(known) >= 2 {
				report("a set %s was created after the switch", set.Name)
			}
			known[set.Name] = true
		}
	}()
	t.Cleanup(func() { cancel(); machines.Stop(); sets.Stop(); wg.Wait() })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// checkMachine reports what is wrong with one watch event of a machine.
func checkMachine(m *v1alpha1.Machine, event watch.EventType, uids map[string]types.UID, report func(string, ...any)) {
	switch {
	case event == watch.Deleted:
		report("machine %s was deleted", m.Name)
	case uids[m.Name] != m.UID:
		report("machine %s (UID %s) is not one of those before the switch", m.Name, m.UID)
	case m.DeletionTimestamp != nil:
		report("machine %s is being deleted", m.Name)
	}
	sets, controllers := 0, 0
	for _, ref := range m.OwnerReferences {
		if ref.Kind == "MachineSet" {
			sets++
		}
		if ref.Controller != nil && *ref.Controller {
			controllers++
		}
	}
	if sets > 1 || controllers > 1 {
		report("machine %s has %d set owners and %d controllers: %v", m.Name, sets, controllers, m.OwnerReferences)
	}
}

func (mig *mcmMigration) updateDeployment(ctx context.Context, change func(*v1alpha1.MachineDeployment)) *v1alpha1.MachineDeployment {
	c := mig.s.Machines.MachineV1alpha1().MachineDeployments(mig.s.NS)
	var out *v1alpha1.MachineDeployment
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.Get(ctx, mig.deployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(d)
		out, err = c.Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		mig.t.Fatalf("deployment %s: %v", mig.deployment, err)
	}
	return out
}

func (mig *mcmMigration) updateSet(ctx context.Context, name string, change func(*v1alpha1.MachineSet)) *v1alpha1.MachineSet {
	c := mig.s.Machines.MachineV1alpha1().MachineSets(mig.s.NS)
	var out *v1alpha1.MachineSet
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		set, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(set)
		out, err = c.Update(ctx, set, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		mig.t.Fatalf("set %s: %v", name, err)
	}
	return out
}

func (mig *mcmMigration) updateMachine(ctx context.Context, name string, change func(*v1alpha1.Machine)) {
	mig.writeMachine(ctx, name, change, false)
}

func (mig *mcmMigration) updateMachineStatus(ctx context.Context, name string, change func(*v1alpha1.Machine)) {
	mig.writeMachine(ctx, name, change, true)
}

func (mig *mcmMigration) writeMachine(ctx context.Context, name string, change func(*v1alpha1.Machine), status bool) {
	c := mig.s.Machines.MachineV1alpha1().Machines(mig.s.NS)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(m)
		if status {
			_, err = c.UpdateStatus(ctx, m, metav1.UpdateOptions{})
		} else {
			_, err = c.Update(ctx, m, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		mig.t.Fatalf("machine %s: %v", name, err)
	}
}

// node returns the node of the machine named machine.
func (mig *mcmMigration) node(ctx context.Context, machine string) *corev1.Node {
	m, err := mig.s.Machines.MachineV1alpha1().Machines(mig.s.NS).Get(ctx, machine, metav1.GetOptions{})
	if err != nil {
		mig.t.Fatal(err)
	}
	n, err := mig.s.Core.CoreV1().Nodes().Get(ctx, m.Labels[v1alpha1.NodeLabelKey], metav1.GetOptions{})
	if err != nil {
		mig.t.Fatalf("node of machine %s: %v", machine, err)
	}
	return n
}

// updateNode changes the node of the machine named machine; the simulated
// kubelet writes the node too, so a conflict is retried on a fresh read.
func (mig *mcmMigration) updateNode(ctx context.Context, machine string, change func(*corev1.Node)) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := mig.node(ctx, machine)
		change(n)
		_, err := mig.s.Core.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		mig.t.Fatalf("node of machine %s: %v", machine, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
