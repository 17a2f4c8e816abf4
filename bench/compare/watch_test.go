//go:build linux

package compare

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/client/clientset/versioned"
	"github.com/mcmkit/mcm/client/informers/externalversions"
)

// watcher follows the run's machines, machine sets, nodes and deployment
// from informers of its own (reads only, not counted as writes) and
// remembers when it first saw each machine, each machine Running and each
// node Ready.
type watcher struct {
	mu         sync.Mutex
	machines   map[string]*machineSeen
	nodeReady  map[string]time.Time // when first seen Ready; zero while not
	nodeSeen   map[string]nodeSeen
	nodes      int
	sets       map[string]setSeen
	deployment *v1alpha1.MachineDeployment
	// notRunning is the number of machines not Running now, and
	// peakNotRunning the most at once since the last markVMs.
	notRunning, peakNotRunning int
	// vms follows the VMs from the last markVMs on; nil before.
	vms *vmLedger
}

type machineSeen struct {
	class      string
	phase      v1alpha1.MachinePhase
	providerID string
	created    time.Time // when first seen
	running    time.Time // when first seen Running; zero before
}

// nodeSeen is what a node reports of its VM: its provider ID and its
// kubelet's version.
type nodeSeen struct{ providerID, kubeletVersion string }

// setSeen is a MachineSet's template class and its replicas, desired
// (spec) and counted (status).
type setSeen struct {
	class            string
	desired, counted int32
}

func startWatcher(ctx context.Context, core kubernetes.Interface, mc versioned.Interface, ns string) (*watcher, error) {
	w := &watcher{machines: map[string]*machineSeen{}, nodeReady: map[string]time.Time{}, nodeSeen: map[string]nodeSeen{}, sets: map[string]setSeen{}}
	nf := informers.NewSharedInformerFactory(core, 0)
	mf := externalversions.NewSharedInformerFactoryWithOptions(mc, 0, externalversions.WithNamespace(ns))
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandlerFuncs
	}{{
		nf.Core().V1().Nodes().Informer(),
		cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.node(obj.(*corev1.Node), false) },
			UpdateFunc: func(_, obj any) { w.node(obj.(*corev1.Node), false) },
			DeleteFunc: func(obj any) {
				if n, ok := obj.(*corev1.Node); ok {
					w.node(n, true)
				} else if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					if n, ok := t.Obj.(*corev1.Node); ok {
						w.node(n, true)
					}
				}
			},
		},
	}, {
		mf.Machine().V1alpha1().Machines().Informer(),
		cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.machine(obj.(*v1alpha1.Machine), false) },
			UpdateFunc: func(_, obj any) { w.machine(obj.(*v1alpha1.Machine), false) },
			DeleteFunc: func(obj any) {
				if m, ok := obj.(*v1alpha1.Machine); ok {
					w.machine(m, true)
				} else if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					if m, ok := t.Obj.(*v1alpha1.Machine); ok {
						w.machine(m, true)
					}
				}
			},
		},
	}, {
		mf.Machine().V1alpha1().MachineSets().Informer(),
		cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.set(obj.(*v1alpha1.MachineSet), false) },
			UpdateFunc: func(_, obj any) { w.set(obj.(*v1alpha1.MachineSet), false) },
			DeleteFunc: func(obj any) {
				if ms, ok := obj.(*v1alpha1.MachineSet); ok {
					w.set(ms, true)
				} else if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					if ms, ok := t.Obj.(*v1alpha1.MachineSet); ok {
						w.set(ms, true)
					}
				}
			},
		},
	}, {
		mf.Machine().V1alpha1().MachineDeployments().Informer(),
		cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.setDeployment(obj.(*v1alpha1.MachineDeployment)) },
			UpdateFunc: func(_, obj any) { w.setDeployment(obj.(*v1alpha1.MachineDeployment)) },
		},
	}}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return nil, err
		}
	}
	nf.Start(ctx.Done())
	mf.Start(ctx.Done())
	for typ, ok := range nf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("the watch of %v never synced", typ)
		}
	}
	for typ, ok := range mf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("the watch of %v never synced", typ)
		}
	}
	return w, nil
}

func (w *watcher) node(n *corev1.Node, deleted bool) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	_, known := w.nodeReady[n.Name]
	switch {
	case deleted:
		if known {
			delete(w.nodeReady, n.Name)
			delete(w.nodeSeen, n.Name)
			w.nodes--
		}
		return
	case !known:
		w.nodes++
		w.nodeReady[n.Name] = time.Time{}
	}
	w.nodeSeen[n.Name] = nodeSeen{providerID: n.Spec.ProviderID, kubeletVersion: n.Status.NodeInfo.KubeletVersion}
	w.vms.saw(n.Spec.ProviderID)
	if w.nodeReady[n.Name].IsZero() && nodeIsReady(n) {
		w.nodeReady[n.Name] = now
	}
}

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (w *watcher) machine(m *v1alpha1.Machine, deleted bool) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	seen, ok := w.machines[m.Name]
	wasDown := ok && seen.phase != v1alpha1.MachineRunning
	if deleted {
		if wasDown {
			w.notRunning--
		}
		delete(w.machines, m.Name)
		return
	}
	if !ok {
		seen = &machineSeen{created: now}
		w.machines[m.Name] = seen
	}
	seen.class = m.Spec.Class.Name
	seen.phase = m.Status.CurrentStatus.Phase
	seen.providerID = m.Spec.ProviderID
	w.vms.saw(seen.providerID)
	if down := seen.phase != v1alpha1.MachineRunning; down != wasDown || !ok {
		switch {
		case down:
			w.notRunning++
		case ok:
			w.notRunning--
		}
		w.peakNotRunning = max(w.peakNotRunning, w.notRunning)
	}
	if seen.running.IsZero() && seen.phase == v1alpha1.MachineRunning {
		seen.running = now
	}
}

func (w *watcher) set(ms *v1alpha1.MachineSet, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if deleted {
		delete(w.sets, ms.Name)
		return
	}
	w.sets[ms.Name] = setSeen{class: ms.Spec.Template.Spec.Class.Name, desired: ms.Spec.Replicas, counted: ms.Status.Replicas}
}

func (w *watcher) setDeployment(d *v1alpha1.MachineDeployment) {
	w.mu.Lock()
	w.deployment = d
	w.mu.Unlock()
}

// state is a snapshot of what the watcher saw.
type state struct {
	machines       int
	running        int            // machines Running
	runningOfClass map[string]int // Running machines by class
	ofClass        map[string]int // machines by class
	phases         map[v1alpha1.MachinePhase]int
	nodes          int
	// nodesOfVersion counts the nodes by the version their kubelet
	// reports.
	nodesOfVersion map[string]int
	// setReplicasOfClass sums the replicas of the machine sets whose
	// template has a class, desired and counted alike.
	setReplicasOfClass map[string]int32
	deployment         *v1alpha1.MachineDeployment // nil before one was seen
}

func (w *watcher) state() state {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := state{
		machines: len(w.machines), nodes: w.nodes, deployment: w.deployment,
		runningOfClass: map[string]int{}, ofClass: map[string]int{}, phases: map[v1alpha1.MachinePhase]int{},
		nodesOfVersion: map[string]int{}, setReplicasOfClass: map[string]int32{},
	}
	for _, n := range w.nodeSeen {
		s.nodesOfVersion[n.kubeletVersion]++
	}
	for _, ms := range w.sets {
		s.setReplicasOfClass[ms.class] += ms.desired + ms.counted
	}
	for _, m := range w.machines {
		s.ofClass[m.class]++
		s.phases[m.phase]++
		if m.phase == v1alpha1.MachineRunning {
			s.running++
			s.runningOfClass[m.class]++
		}
	}
	return s
}

// boot is when a machine was first seen, and when its node first was
// Ready (zero if never).
type boot struct{ created, ready time.Time }

// rollout returns the boots of the machines of class, their nodes named
// after them, as the simulated cloud names them.
func (w *watcher) rollout(class string) []boot {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []boot
	for name, m := range w.machines {
		if m.class == class {
			out = append(out, boot{created: m.created, ready: w.nodeReady[name]})
		}
	}
	return out
}

// deploymentDone tells whether the deployment's status reports n machines,
// all of its current template and available, for its current generation.
func (s state) deploymentDone(n int) bool {
	d := s.deployment
	return d != nil && d.Status.ObservedGeneration >= d.Generation &&
		d.Status.Replicas == int32(n) && d.Status.UpdatedReplicas == int32(n) && d.Status.AvailableReplicas == int32(n)
}

func (s state) String() string {
	out := fmt.Sprintf("%d machines %v, %d nodes", s.machines, s.phases, s.nodes)
	if len(s.nodesOfVersion) > 1 {
		out += fmt.Sprintf(" by kubelet version %v", s.nodesOfVersion)
	}
	if d := s.deployment; d != nil {
		out += fmt.Sprintf("; deployment: %d replicas, %d updated, %d available (generation %d observed %d)",
			d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas, d.Generation, d.Status.ObservedGeneration)
	}
	return out
}

// reactionLatency is how long the managers took to see a node Ready and
// call its machine Running: for every machine whose node was seen Ready,
// the time from then until the machine was first seen Running (0 if it
// was seen Running first), as the median and the 99th percentile.
func (w *watcher) reactionLatency() (p50, p99 time.Duration) {
	w.mu.Lock()
	var latencies []time.Duration
	for name, m := range w.machines {
		ready := w.nodeReady[name]
		if ready.IsZero() || m.running.IsZero() {
			continue
		}
		latencies = append(latencies, max(0, m.running.Sub(ready)))
	}
	w.mu.Unlock()
	return percentile(latencies, 50), percentile(latencies, 99)
}

// percentile is the nearest-rank p-th percentile of ds (0 for none).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	rank := (p*len(ds) + 99) / 100 // ceil(p/100 * n), 1-based
	return ds[max(rank, 1)-1]
}
