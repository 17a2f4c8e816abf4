package orphanvms

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// orphanVM is a VM a driver listed for a class.
type orphanVM struct {
	ProviderID, MachineName string
}

// suspects remembers since when each VM has looked orphaned, so that a VM
// is deleted only after it has done so for the whole grace period, across
// checks: a cache that is briefly wrong (after a restart, MCM #657) cannot
// make a healthy VM look orphaned for that long.
type suspects struct {
	mu    sync.Mutex
	since map[string]time.Time // by provider ID
}

// suspect records vm as looking orphaned at now and returns since when it
// has.
func (s *suspects) suspect(providerID string, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since == nil {
		s.since = map[string]time.Time{}
	}
	if t, ok := s.since[providerID]; ok {
		return t
	}
	s.since[providerID] = now
	return now
}

// keep forgets the VMs not in seen: claimed again, or gone.
func (s *suspects) keep(seen map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.since {
		if !seen[id] {
			delete(s.since, id)
		}
	}
}

// orphansOf returns the listed VMs no machine claims: none has the VM's
// machine name in the class's namespace with the same (or still no)
// provider ID, and none has its provider ID. A machine still being created
// has no provider ID yet and claims its VM by name. It is pure.
func orphansOf(listed map[string]string, namespace string, machines []*v1alpha1.Machine) []orphanVM {
	byName := map[string]*v1alpha1.Machine{}
	byProviderID := map[string]bool{}
	for _, m := range machines {
		if m.Namespace == namespace {
			byName[m.Name] = m
		}
		if m.Spec.ProviderID != "" {
			byProviderID[m.Spec.ProviderID] = true
		}
	}
	var out []orphanVM
	for id, name := range listed {
		if byProviderID[id] {
			continue
		}
		if m := byName[name]; m != nil && (m.Spec.ProviderID == "" || m.Spec.ProviderID == id) {
			continue
		}
		out = append(out, orphanVM{ProviderID: id, MachineName: name})
	}
	return out
}

// collectOrphans is one pass of the orphan collection over every class:
// the driver lists the class's VMs, and a VM no machine claims is deleted
// once it has looked orphaned for OrphanGracePeriod and an uncached read
// confirms no machine claims it. Nothing is collected while Outages is
// frozen, nor within one OrphanVMsPeriod after an outage ended (the caches
// may still show the world from before it). A class that fails does not
// stop the others; the pass returns every failure, joined.
func (c *Collector) collectOrphans(ctx context.Context) error {
	now := c.opts.Clock.Now()
	if o := c.opts.Outages; o != nil {
		if o.Frozen(ctx) {
			return nil
		}
		if end := o.LastOutageEnd(); !end.IsZero() && now.Sub(end) < c.opts.OrphanVMsPeriod {
			return nil
		}
	}
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing machine classes: %w", err)
	}
	machines, err := c.machines.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing machines: %w", err)
	}
	seen := map[string]bool{}
	var errs []error
	for _, class := range classes {
		secret, err := driver.ReadClassSecret(c.secrets, class)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the VMs of class %s/%s: %w", class.Namespace, class.Name, err))
			continue
		}
		resp, err := c.driver.ListMachines(ctx, &driver.ListMachinesRequest{MachineClass: class, Secret: secret})
		if driver.CodeOf(err) == driver.Unimplemented {
			continue // the driver cannot list: nothing is collected for it
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("listing the VMs of class %s/%s: %w", class.Namespace, class.Name, err))
			continue
		}
		for _, vm := range orphansOf(resp.Machines, class.Namespace, machines) {
			seen[vm.ProviderID] = true
			if now.Sub(c.suspects.suspect(vm.ProviderID, now)) < c.opts.OrphanGracePeriod {
				continue
			}
			errs = append(errs, c.deleteOrphan(ctx, class, secret, vm))
		}
	}
	c.suspects.keep(seen)
	return errors.Join(errs...)
}

// deleteOrphan deletes vm after an uncached read confirms that no machine
// of its name claims it.
func (c *Collector) deleteOrphan(ctx context.Context, class *v1alpha1.MachineClass, secret *corev1.Secret, vm orphanVM) error {
	m, err := c.client.MachineV1alpha1().Machines(class.Namespace).Get(ctx, vm.MachineName, metav1.GetOptions{})
	switch {
	case err == nil && (m.Spec.ProviderID == "" || m.Spec.ProviderID == vm.ProviderID):
		return nil // claimed after all: the cache was behind
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("confirming orphan VM %s: %w", vm.ProviderID, err)
	}
	dummy := &v1alpha1.Machine{ObjectMeta: metav1.ObjectMeta{Name: vm.MachineName, Namespace: class.Namespace},
		Spec: v1alpha1.MachineSpec{ProviderID: vm.ProviderID}}
	if _, err := c.driver.DeleteMachine(ctx, &driver.DeleteMachineRequest{Machine: dummy, MachineClass: class, Secret: secret}); err != nil &&
		driver.CodeOf(err) != driver.NotFound {
		return fmt.Errorf("deleting orphan VM %s: %w", vm.ProviderID, err)
	}
	c.orphansDeleted.Inc()
	logr.FromContextOrDiscard(ctx).Info("Deleted an orphan VM: no machine claimed it for the grace period",
		"providerID", vm.ProviderID, "machineName", vm.MachineName, "class", class.Namespace+"/"+class.Name, "grace", c.opts.OrphanGracePeriod)
	if c.opts.Recorder != nil {
		c.opts.Recorder.Eventf(class, corev1.EventTypeNormal, ReasonOrphanDeleted,
			"Deleted VM %s (machine name %s): no machine claimed it for %v", vm.ProviderID, vm.MachineName, c.opts.OrphanGracePeriod)
	}
	return nil
}
