// Package registrationstest counts the event handlers on an informer, for
// tests that check a controller leaves none behind when it stops.
//
// # Usage
//
//	inf := registrationstest.New(machineFactory, coreFactory)
//	ctrl, err := machineset.NewController(client, machineset.Informers{MachineSets: inf.MachineSets, ...}, opts)
//	registrationstest.CheckRunRemovesHandlers(t, inf, 3, ctrl.Run)
package registrationstest

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/client/informers/externalversions"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
)

// Informer is a cache.SharedIndexInformer that counts the handlers added
// through it and not removed.
type Informer struct {
	cache.SharedIndexInformer

	mu   sync.Mutex
	live int
}

// Wrap returns i, counting handlers.
func Wrap(i cache.SharedIndexInformer) *Informer { return &Informer{SharedIndexInformer: i} }

// Handlers is the number of handlers added and not removed.
func (i *Informer) Handlers() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.live
}

func (i *Informer) count(reg cache.ResourceEventHandlerRegistration, err error) (cache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		i.mu.Lock()
		i.live++
		i.mu.Unlock()
	}
	return reg, err
}

func (i *Informer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.count(i.SharedIndexInformer.AddEventHandler(h))
}

func (i *Informer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.count(i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(h, resync))
}

func (i *Informer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.count(i.SharedIndexInformer.AddEventHandlerWithOptions(h, opts))
}

func (i *Informer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	err := i.SharedIndexInformer.RemoveEventHandler(reg)
	if err == nil {
		i.mu.Lock()
		i.live--
		i.mu.Unlock()
	}
	return err
}

// Typed is a typed informer, an Informer and its Lister as the generated
// informers are, over a counting Informer: hand it to a controller where
// it takes, say, a MachineInformer.
type Typed[L any] struct {
	Counted   *Informer
	NewLister func(cache.Indexer) L
}

func (t Typed[L]) Informer() cache.SharedIndexInformer { return t.Counted }
func (t Typed[L]) Lister() L                           { return t.NewLister(t.Counted.GetIndexer()) }

// Informers are counting typed informers of the kinds mcm's controllers
// read, from a machine and a core informer factory.
type Informers struct {
	Machines    Typed[machinelisters.MachineLister]
	Classes     Typed[machinelisters.MachineClassLister]
	MachineSets Typed[machinelisters.MachineSetLister]
	Deployments Typed[machinelisters.MachineDeploymentLister]
	Secrets     Typed[corelisters.SecretLister]
	Nodes       Typed[corelisters.NodeLister]
}

// New returns counting informers of the factories' informers.
func New(machines externalversions.SharedInformerFactory, core informers.SharedInformerFactory) Informers {
	m := machines.Machine().V1alpha1()
	return Informers{
		Machines:    Typed[machinelisters.MachineLister]{Wrap(m.Machines().Informer()), machinelisters.NewMachineLister},
		Classes:     Typed[machinelisters.MachineClassLister]{Wrap(m.MachineClasses().Informer()), machinelisters.NewMachineClassLister},
		MachineSets: Typed[machinelisters.MachineSetLister]{Wrap(m.MachineSets().Informer()), machinelisters.NewMachineSetLister},
		Deployments: Typed[machinelisters.MachineDeploymentLister]{Wrap(m.MachineDeployments().Informer()), machinelisters.NewMachineDeploymentLister},
		Secrets:     Typed[corelisters.SecretLister]{Wrap(core.Core().V1().Secrets().Informer()), corelisters.NewSecretLister},
		Nodes:       Typed[corelisters.NodeLister]{Wrap(core.Core().V1().Nodes().Informer()), corelisters.NewNodeLister},
	}
}

// Handlers returns the handlers added and not removed, by kind; kinds
// without any are left out.
func (i Informers) Handlers() map[string]int {
	out := map[string]int{}
	for kind, c := range map[string]*Informer{
		"machines": i.Machines.Counted, "classes": i.Classes.Counted, "machinesets": i.MachineSets.Counted,
		"deployments": i.Deployments.Counted, "secrets": i.Secrets.Counted, "nodes": i.Nodes.Counted,
	} {
		if n := c.Handlers(); n != 0 {
			out[kind] = n
		}
	}
	return out
}

// CheckRunRemovesHandlers checks a controller built on inf: that it added
// handlers to kinds kinds, and that once run (its Run) returned, here with
// a context that has ended, none of them is left.
func CheckRunRemovesHandlers(t testing.TB, inf Informers, kinds int, run func(ctx context.Context, workers int) error) {
	t.Helper()
	if got := inf.Handlers(); len(got) != kinds {
		t.Fatalf("handlers after the controller was built: %v, want on %d kinds", got, kinds)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := run(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if left := inf.Handlers(); len(left) > 0 {
		t.Errorf("handlers left after Run returned: %v", left)
	}
}
