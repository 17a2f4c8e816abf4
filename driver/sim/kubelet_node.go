package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/patch"
)

// AnnotationSimulated marks Nodes a simulated kubelet registered; its value
// is the kubelet's identity, so that several kubelets (of several clouds)
// can share a cluster without touching each other's nodes.
const AnnotationSimulated = "sim.mcmkit.io/kubelet"

// controllerManagedAttachDetach tells kube-controller-manager's attach-detach
// controller that it, not the kubelet, attaches volumes to the node.
const controllerManagedAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach"

// nodeReporter registers the Node of each running VM and reports its
// status, as the kubelet's node status manager does. It writes a status
// when it changed or StatusReportPeriod has passed, not on every sync,
// because the lease carries liveness and a write per sync and node would
// load the API server for nothing. Whether a status changed is only worked
// out again when the node object did, so that a sync of thousands of
// unchanged nodes costs a map lookup each.
type nodeReporter struct {
	client       kubernetes.Interface
	identity     string        // the value of AnnotationSimulated on its nodes
	reportPeriod time.Duration // how often an unchanged status is written again
	// jitter returns the wait until the next report, given the period.
	jitter func(time.Duration) time.Duration

	mu        sync.Mutex
	overrides map[string]map[corev1.NodeConditionType]corev1.NodeCondition // by node
	// reported holds, by node, the condition types an override ever gave
	// it: this kubelet's own, removed when their override is cleared.
	// Conditions of any other type are someone else's (the machine
	// controller's Preserved, a problem detector's) and are kept.
	reported map[string]map[corev1.NodeConditionType]bool
	reports  map[string]reportState // by node; none: due now
	epoch    uint64                 // last reportState.epoch handed out
	// registered is when this kubelet registered each node, until it sees
	// the node deleted (see cacheLagBound).
	registered map[string]time.Time
}

// reportState is what is known of one node's status.
type reportState struct {
	// next is when an unchanged status is to be written again.
	next time.Time
	// checked is the resourceVersion of the node object last found to
	// show the desired status, or written with it: while the cached node
	// still has it, the status needs no write before next.
	checked string
	// epoch tells a state made due at once (by a changed condition, say)
	// from the one a report in flight started from.
	epoch uint64
}

// cacheLagBound is how long after registering a node the kubelet trusts
// that the node exists although its cache does not show it yet. Under
// load the cache lags by seconds, and every sync in between would post
// the node again only to be told it exists. A node deleted before the
// cache ever showed it is registered again after this bound.
const cacheLagBound = 30 * time.Second

func newNodeReporter(client kubernetes.Interface, identity string, reportPeriod time.Duration, jitter func(time.Duration) time.Duration) *nodeReporter {
	return &nodeReporter{
		client:       client,
		identity:     identity,
		reportPeriod: reportPeriod,
		jitter:       jitter,
		overrides:    map[string]map[corev1.NodeConditionType]corev1.NodeCondition{},
		reported:     map[string]map[corev1.NodeConditionType]bool{},
		reports:      map[string]reportState{},
		registered:   map[string]time.Time{},
	}
}

// owns reports whether this kubelet registered the node. Nodes of the same
// name registered by another simulated kubelet, or by a real one, are left
// alone.
func (r *nodeReporter) owns(node *corev1.Node) bool {
	return node.Annotations[AnnotationSimulated] == r.identity
}

// setCondition makes the node report cond from now on, in place of the
// healthy default of its type or in addition to the defaults.
func (r *nodeReporter) setCondition(node string, cond corev1.NodeCondition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.overrides[node] == nil {
		r.overrides[node] = map[corev1.NodeConditionType]corev1.NodeCondition{}
	}
	r.overrides[node][cond.Type] = cond
	if r.reported[node] == nil {
		r.reported[node] = map[corev1.NodeConditionType]bool{}
	}
	r.reported[node][cond.Type] = true
	r.dueNowLocked(node)
}

// clearCondition returns the condition of type t to its healthy default,
// or removes it if there is none.
func (r *nodeReporter) clearCondition(node string, t corev1.NodeConditionType) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.overrides[node], t)
	r.dueNowLocked(node)
}

// reportAtNextSync makes the node's status due at once, for a node whose
// kubelet has just come back from silence.
// Condition overrides stay: they belong to the node name.
func (r *nodeReporter) reportAtNextSync(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dueNowLocked(node)
}

// dueNowLocked makes the node's status due at the next sync, and keeps a
// report in flight from recording what it found before.
func (r *nodeReporter) dueNowLocked(node string) {
	r.epoch++
	r.reports[node] = reportState{epoch: r.epoch}
}

// forget drops what is known of a deleted node's status; the node's
// condition overrides stay with its name.
func (r *nodeReporter) forget(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.reports, node)
	delete(r.registered, node)
}

// spread makes the node's first unchanged-status report due at a random
// time within one period from now, for a node registered before this
// kubelet started. A status that needs a change is still written at the
// next sync.
func (r *nodeReporter) spread(node string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	r.reports[node] = reportState{next: now.Add(rand.N(r.reportPeriod)), epoch: r.epoch}
}

// due reports whether the node's status may need a write at now: it is
// due, or the node object changed since its status was last checked.
func (r *nodeReporter) due(node *corev1.Node, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.reports[node.Name]
	return !ok || s.checked != node.ResourceVersion || !now.Before(s.next)
}

// register creates the Node of vm with its status, as the kubelet does
// (the API server keeps a new node's status): the node is Ready in its
// first version, and its first report cannot collide with the writes
// others make to a new node (the machine controller's finalizer,
// kube-controller-manager's annotations), which a status written after
// the creation did, costing a retry and a sync period. It returns nil and
// no error if the node exists already: the informer cache lags, and the
// next sync sees it.
func (r *nodeReporter) register(ctx context.Context, vm VM, now time.Time) (*corev1.Node, error) {
	r.mu.Lock()
	state, known := r.reports[vm.NodeName]
	overrides := maps.Clone(r.overrides[vm.NodeName])
	registeredAt, registered := r.registered[vm.NodeName]
	r.mu.Unlock()
	if registered && now.Sub(registeredAt) < cacheLagBound {
		return nil, nil // registered; the cache has not shown it yet
	}

	node := r.nodeFor(vm)
	node.Status = desiredNodeStatus(vm, overrides, nil, nil, now)
	created, err := r.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("registering node %s: %w", vm.NodeName, err)
	}
	r.mu.Lock()
	r.registered[vm.NodeName] = now
	r.mu.Unlock()
	// Whatever was known of a node of this name before describes another.
	r.record(vm.NodeName, known, state, reportState{next: now.Add(r.jitter(r.reportPeriod)), checked: created.ResourceVersion, epoch: state.epoch})
	return created, nil
}

// deregister deletes the node of a VM that is gone, as a cloud controller
// manager would. The UID precondition keeps it from deleting a node of the
// same name registered since the cache was filled.
func (r *nodeReporter) deregister(ctx context.Context, node *corev1.Node) error {
	err := r.client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &node.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s of a gone VM: %w", node.Name, err)
	}
	return nil
}

// nodeFor is the Node a kubelet on vm registers.
func (r *nodeReporter) nodeFor(vm VM) *corev1.Node {
	l := maps.Clone(vm.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[corev1.LabelHostname] = vm.NodeName
	l[corev1.LabelOSStable] = "linux"
	l[corev1.LabelArchStable] = "amd64"
	l[corev1.LabelTopologyZone] = vm.Zone
	l[corev1.LabelInstanceTypeStable] = vm.InstanceType
	l[v1alpha1.MachineNameLabelKey] = vm.MachineName
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   vm.NodeName,
			Labels: l,
			Annotations: map[string]string{
				AnnotationSimulated:           r.identity,
				controllerManagedAttachDetach: "true",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: vm.ProviderID},
	}
}

// reportStatus writes the status of vm's node when it changed or is due.
func (r *nodeReporter) reportStatus(ctx context.Context, vm VM, node *corev1.Node, now time.Time) error {
	r.mu.Lock()
	state, known := r.reports[node.Name]
	overrides := maps.Clone(r.overrides[node.Name])
	reported := maps.Clone(r.reported[node.Name])
	r.mu.Unlock()

	due := !known || !now.Before(state.next)
	if !due && state.checked == node.ResourceVersion && !versionChanged(vm, node) {
		return nil
	}
	want := desiredNodeStatus(vm, overrides, reported, node.Status.Conditions, now)
	keepExtendedResources(want, node.Status.Capacity)
	if !due && statusEquivalent(node.Status, want) {
		r.record(node.Name, known, state, reportState{next: state.next, checked: node.ResourceVersion, epoch: state.epoch})
		return nil
	}
	data, err := nodeStatusPatch(node.Status, want)
	if err != nil {
		return fmt.Errorf("reporting status of node %s: %w", node.Name, err)
	}
	written := node
	if data != nil {
		written, err = patch.SendStrategic(ctx, r.client.CoreV1().Nodes().Patch, node.Name, data, "", "status")
		if apierrors.IsNotFound(err) {
			return nil // deleted since the cache saw it
		}
		if err != nil {
			return fmt.Errorf("reporting status of node %s: %w", node.Name, err)
		}
	}
	r.record(node.Name, known, state, reportState{next: now.Add(r.jitter(r.reportPeriod)), checked: written.ResourceVersion, epoch: state.epoch})
	return nil
}

// nodeStatusPatch is the strategic merge patch from cur to the fields of
// want the kubelet reports, or nil if there is nothing to change. As the
// kubelet's, it is sent without a guard: the node's other writers (labels,
// finalizers, kube-controller-manager's Unknown) do not make it fail, and
// the API server merges conditions by type, so a condition another writer
// added since the cache was read is kept.
func nodeStatusPatch(cur, want corev1.NodeStatus) ([]byte, error) {
	next := cur.DeepCopy()
	next.Capacity, next.Allocatable, next.Addresses = want.Capacity, want.Allocatable, want.Addresses
	next.Conditions, next.NodeInfo = want.Conditions, want.NodeInfo
	before, err := json.Marshal(corev1.Node{Status: cur})
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(corev1.Node{Status: *next})
	if err != nil {
		return nil, err
	}
	data, err := strategicpatch.CreateTwoWayMergePatch(before, after, corev1.Node{})
	if err != nil || string(data) == "{}" {
		return nil, err
	}
	return data, nil
}

// record stores what a report found out, unless the node's state changed
// since the report read it (a condition was set, or its report made due at
// once): that change must not be overwritten with what was found before it.
func (r *nodeReporter) record(node string, known bool, before, after reportState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.reports[node]; ok == known && cur == before {
		r.reports[node] = after
	}
}

// desiredNodeStatus is the status the node's kubelet reports: capacity and
// addresses of the VM, healthy conditions unless overridden. Transition
// times are kept from current when a condition's status did not change.
// The current conditions of types neither a default nor ever reported (by
// an override) are someone else's and stay as they are.
func desiredNodeStatus(vm VM, overrides map[corev1.NodeConditionType]corev1.NodeCondition, reported map[corev1.NodeConditionType]bool, current []corev1.NodeCondition, now time.Time) corev1.NodeStatus {
	capacity := vm.Capacity.DeepCopy()
	if capacity == nil {
		capacity = corev1.ResourceList{}
	}
	if _, ok := capacity[corev1.ResourcePods]; !ok {
		capacity[corev1.ResourcePods] = resource.MustParse("110")
	}
	conditions := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "simulated kubelet is posting ready status"},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
	}
	for i, c := range conditions {
		if o, ok := overrides[c.Type]; ok {
			conditions[i] = o
		}
	}
	for _, t := range slices.Sorted(maps.Keys(overrides)) {
		if !slices.ContainsFunc(conditions, func(c corev1.NodeCondition) bool { return c.Type == t }) {
			conditions = append(conditions, overrides[t])
		}
	}
	heartbeat := metav1.NewTime(now)
	for i := range conditions {
		conditions[i].LastHeartbeatTime = heartbeat
		conditions[i].LastTransitionTime = heartbeat
		for _, cur := range current {
			if cur.Type == conditions[i].Type && cur.Status == conditions[i].Status {
				conditions[i].LastTransitionTime = cur.LastTransitionTime
			}
		}
	}
	for _, cur := range current {
		if !reported[cur.Type] && !slices.ContainsFunc(conditions, func(c corev1.NodeCondition) bool { return c.Type == cur.Type }) {
			conditions = append(conditions, cur)
		}
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Addresses:   slices.Clone(vm.Addresses),
		Conditions:  conditions,
		NodeInfo: corev1.NodeSystemInfo{
			OperatingSystem: "linux", Architecture: "amd64",
			KubeletVersion: kubeletVersion(vm), ContainerRuntimeVersion: "sim://1",
		},
	}
}

// kubeletVersion is the version vm's kubelet reports: the VM's, or
// DefaultKubeletVersion for a VM of a source that sets none.
func kubeletVersion(vm VM) string {
	if vm.KubeletVersion == "" {
		return DefaultKubeletVersion
	}
	return vm.KubeletVersion
}

// versionChanged reports whether vm's kubelet reports another version than
// its node shows: an in-place update has just changed it, and the new
// version is written at once, not when the status is next due.
func versionChanged(vm VM, node *corev1.Node) bool {
	return node.Status.NodeInfo.KubeletVersion != kubeletVersion(vm)
}

// keepExtendedResources keeps in want the extended resources others have
// added to the node's capacity (a device plugin, or the machine
// controller's virtual capacity), as a kubelet does: it reports only the
// resources it knows and keeps the rest, mirrored into allocatable.
func keepExtendedResources(want corev1.NodeStatus, current corev1.ResourceList) {
	for name, q := range current {
		if _, ours := want.Capacity[name]; ours || !strings.Contains(string(name), "/") {
			continue
		}
		want.Capacity[name] = q.DeepCopy()
		want.Allocatable[name] = q.DeepCopy()
	}
}

// statusEquivalent compares what a status write would change, ignoring
// heartbeat times.
func statusEquivalent(cur, want corev1.NodeStatus) bool {
	if !apiequality.Semantic.DeepEqual(cur.Capacity, want.Capacity) ||
		!apiequality.Semantic.DeepEqual(cur.Allocatable, want.Allocatable) ||
		!apiequality.Semantic.DeepEqual(cur.Addresses, want.Addresses) ||
		cur.NodeInfo != want.NodeInfo ||
		len(cur.Conditions) != len(want.Conditions) {
		return false
	}
	for _, w := range want.Conditions {
		i := slices.IndexFunc(cur.Conditions, func(c corev1.NodeCondition) bool { return c.Type == w.Type })
		if i < 0 {
			return false
		}
		c := cur.Conditions[i]
		if c.Status != w.Status || c.Reason != w.Reason || c.Message != w.Message {
			return false
		}
	}
	return true
}
