package machineset

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/api/machine/v1alpha1/validation"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	machineinformers "github.com/mcmkit/mcm/client/informers/externalversions/machine/v1alpha1"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/expectations"
	"github.com/mcmkit/mcm/internal/cachetransform"
	"github.com/mcmkit/mcm/internal/dedup"
	"github.com/mcmkit/mcm/internal/ownership"
	"github.com/mcmkit/mcm/internal/registrations"
	"github.com/mcmkit/mcm/workqueue"
)

// Informers are the shared informers the controller reads from. Hand them
// to NewController before starting their factory.
type Informers struct {
	MachineSets machineinformers.MachineSetInformer
	Machines    machineinformers.MachineInformer
	// Classes, when given, lets the controller check that a set's template
	// names a MachineClass that exists before creating machines from it,
	// and resume a set as soon as its class appears. Nil skips the check:
	// the machine controller then reports the missing class on each
	// machine.
	Classes machineinformers.MachineClassInformer
}

// Controller keeps the machines of MachineSets.
type Controller struct {
	client versioned.Interface
	opts   Options

	sets     machinelisters.MachineSetLister
	machines machinelisters.MachineLister
	classes  machinelisters.MachineClassLister // nil: classes are not checked
	handlers registrations.Set                 // removed when Run returns

	queue *workqueue.Queue[string]
	// exp holds the creations and deletions each set issued until the
	// cache shows them; a set is not scaled again before.
	exp *expectations.Store[string]
	// writes makes a sync wait for the cache to show its own status write.
	writes  *expectations.Writes[string]
	metrics *metrics
	// toldFrozen remembers the freeze each set last told of by an event.
	toldFrozen dedup.Messages
	// toldHeld remembers the preserved machine each set last told of as
	// holding its scale-down.
	toldHeld dedup.Messages
	// creating holds the creation runs under way, which a scale-down
	// lowers (limitCreations).
	creating creationRuns
	// prov tells which machines each set created (provenance).
	prov provenance
}

// NewController returns a MachineSet controller on client (the control
// cluster's clientset). It registers event handlers and transforms on the
// informers and the metrics on opts.Registerer; it starts nothing.
func NewController(client versioned.Interface, inf Informers, opts Options) (*Controller, error) {
	if client == nil || inf.MachineSets == nil || inf.Machines == nil {
		return nil, errors.New("machineset: client and informers must not be nil")
	}
	o, err := opts.complete()
	if err != nil {
		return nil, fmt.Errorf("machineset: invalid options: %w", err)
	}
	c := &Controller{
		client: client, opts: o,
		sets:     inf.MachineSets.Lister(),
		machines: inf.Machines.Lister(),
		exp:      expectations.New[string](expectations.Options{Clock: o.Clock}),
		writes:   expectations.NewWrites[string](expectations.Options{Clock: o.Clock}),
	}
	if inf.Classes != nil {
		c.classes = inf.Classes.Lister()
	}
	if c.metrics, err = newMetrics(o.Registerer, c); err != nil {
		return nil, fmt.Errorf("machineset: %w", err)
	}
	c.queue, err = workqueue.New("machineset", workqueue.ReconcilerFunc[string](c.Reconcile),
		workqueue.Options{Registerer: o.Registerer, Clock: o.Clock, Logger: o.Logger})
	if err != nil {
		return nil, fmt.Errorf("machineset: %w", err)
	}
	if err := c.register(inf); err != nil {
		return nil, fmt.Errorf("machineset: %w", err)
	}
	return c, nil
}

func (c *Controller) register(inf Informers) error {
	cachetransform.SetOn(inf.MachineSets.Informer(), inf.Machines.Informer())
	add := c.handlers.Add
	if err := add(inf.MachineSets.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(_, obj any) {
			c.limitCreations(obj)
			c.enqueue(obj)
		},
		DeleteFunc: c.onSetDelete,
	}); err != nil {
		return err
	}
	if err := add(inf.Machines.Informer(), cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			// The machines there before this controller watched: a set
			// controlling one then made it, or would have said otherwise.
			if m, ok := obj.(*v1alpha1.Machine); ok && isInInitialList {
				c.prov.initial(m)
			}
			c.onMachineAdd(obj)
		},
		UpdateFunc: c.onMachineUpdate,
		DeleteFunc: c.onMachineDelete,
	}); err != nil {
		return err
	}
	if inf.Classes == nil {
		return nil
	}
	cachetransform.SetOn(inf.Classes.Informer())
	// Only a class that appears or starts being deleted changes a set's
	// plan; its other updates are the machine controller's business.
	return add(inf.Classes.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueSetsOfClass,
		UpdateFunc: func(oldObj, obj any) {
			old, ok1 := oldObj.(*v1alpha1.MachineClass)
			class, ok2 := obj.(*v1alpha1.MachineClass)
			if ok1 && ok2 && old.DeletionTimestamp == nil && class.DeletionTimestamp != nil {
				c.enqueueSetsOfClass(class)
			}
		},
	})
}

// Run waits for the caches, then reconciles with workers workers until ctx
// ends. It returns nil after ctx ended, an error only for bad arguments.
// When it returns, its event handlers are removed from the informers,
// which may go on serving others: run a controller once.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer c.handlers.RemoveAll(logr.FromContextOrDiscard(workqueue.ControllerContext(ctx, c.opts.Logger, "machineset")))
	return c.queue.RunSynced(ctx, workers, c.opts.Logger, "machineset", c.handlers.Synced()...)
}

func (c *Controller) enqueue(obj any) {
	if key := workqueue.KeyOf(obj); key != "" {
		c.queue.Add(key)
	}
}

func (c *Controller) onSetDelete(obj any) {
	key := workqueue.KeyOf(obj)
	if run := c.creating.get(key); run != nil {
		run.lower(0)
	}
	c.exp.Delete(key)
	c.writes.Forget(key)
	c.toldFrozen.Forget(key)
	c.toldHeld.Forget(key)
	c.prov.forgetSet(key)
}

// ownerKey returns the key of the set that controls m, or "".
func ownerKey(m *v1alpha1.Machine) string {
	return ownership.ControllerKey(m, v1alpha1.SchemeGroupVersion.WithKind("MachineSet"))
}

func (c *Controller) onMachineAdd(obj any) {
	m, ok := obj.(*v1alpha1.Machine)
	if !ok {
		return
	}
	if key := ownerKey(m); key != "" {
		c.exp.CreationObserved(key)
		c.queue.Add(key)
		return
	}
	c.enqueueSelecting(m) // an orphan: a set may adopt it
}

func (c *Controller) onMachineUpdate(oldObj, obj any) {
	old, ok1 := oldObj.(*v1alpha1.Machine)
	m, ok2 := obj.(*v1alpha1.Machine)
	if !ok1 || !ok2 || old.ResourceVersion == m.ResourceVersion {
		return
	}
	key := ownerKey(m)
	if m.DeletionTimestamp != nil && key != "" {
		c.exp.DeletionObserved(key, m.UID)
	}
	if !machineChangeMatters(old, m) {
		return // nothing the set decides on changed (see the package doc)
	}
	if oldKey := ownerKey(old); oldKey != key && oldKey != "" {
		c.queue.Add(oldKey)
	}
	if key != "" {
		c.queue.Add(key)
		return
	}
	c.enqueueSelecting(m)
}

func (c *Controller) onMachineDelete(obj any) {
	obj = workqueue.ObjectOf(obj)
	m, ok := obj.(*v1alpha1.Machine)
	if !ok {
		return
	}
	key := ownerKey(m)
	c.prov.gone(key, m)
	if key != "" {
		c.exp.DeletionObserved(key, m.UID)
		c.queue.Add(key)
	}
}

// enqueueSetsOfClass queues the sets whose template names the class: one
// that appears lets a set waiting for it create machines, one whose
// deletion starts stops the set's creations.
func (c *Controller) enqueueSetsOfClass(obj any) {
	class, ok := obj.(*v1alpha1.MachineClass)
	if !ok {
		return
	}
	sets, err := c.sets.MachineSets(class.Namespace).List(everything)
	if err != nil {
		return
	}
	for _, s := range sets {
		if s.Spec.Template.Spec.Class.Name == class.Name {
			c.queue.Add(workqueue.KeyOf(s))
		}
	}
}

// enqueueSelecting queues the sets whose selector matches an orphan. A
// selector without a positive requirement, or naming a label key the
// controllers write (node, ...), selects nothing here: such a set is
// invalid (validation.SelectorAdopts) and adopts nothing.
func (c *Controller) enqueueSelecting(m *v1alpha1.Machine) {
	sets, err := c.sets.MachineSets(m.Namespace).List(everything)
	if err != nil {
		return
	}
	for _, s := range sets {
		if sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector); err == nil && validation.SelectorAdopts(validation.OwnerMachineSet, s.Spec.Selector) && sel.Matches(labelsOf(m)) {
			c.queue.Add(workqueue.KeyOf(s))
		}
	}
}
