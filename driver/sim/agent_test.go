package sim

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	machinefake "github.com/mcmkit/mcm/client/clientset/versioned/fake"
	machinelisters "github.com/mcmkit/mcm/client/listers/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
	"github.com/mcmkit/mcm/workqueue"
)

var agentEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	agentNS       = "shoot"
	agentIdentity = "kubelet-a"
	oldVersion    = "v1.37.0"
	newVersion    = "v1.38.0"
)

// agentWorld is a cloud with one VM of class "old" for machine m1, whose
// deployment's template names class "new", and its node, ReadyForUpdate.
type agentWorld struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	cloud  *Cloud
	target *fake.Clientset
	agent  *Agent
	nodes  cache.Indexer
	vm     VM
}

func agentClass(name string, spec ProviderSpec) *v1alpha1.MachineClass {
	return &v1alpha1.MachineClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: agentNS},
		Provider:   ProviderName, ProviderSpec: spec.RawExtension(),
	}
}

func agentSpec(version, pool string) ProviderSpec {
	return ProviderSpec{
		Zone: "zone-a", InstanceType: "small", KubeletVersion: version, Labels: map[string]string{"pool": pool},
		InPlaceUpdate: &InPlaceUpdate{Agent: true, UpdateDelay: &metav1.Duration{Duration: time.Minute}},
	}
}

func controllerRef(kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "machine.sapcloud.io/v1alpha1", Kind: kind, Name: name, UID: types.UID("u-" + name), Controller: ptr.To(true)}}
}

func newAgentWorld(t *testing.T, oldSpec, newSpec ProviderSpec) *agentWorld {
	t.Helper()
	clk := clocktesting.NewFakeClock(agentEpoch)
	cloud, err := New(Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	old, updated := agentClass("old", oldSpec), agentClass("new", newSpec)
	machine := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: agentNS, OwnerReferences: controllerRef("MachineSet", "md-a")},
		Spec:       v1alpha1.MachineSpec{Class: v1alpha1.ClassSpec{Kind: "MachineClass", Name: "old"}},
	}
	secret := &corev1.Secret{Data: map[string][]byte{CredentialsKey: []byte("t"), v1alpha1.UserDataKey: []byte("#!")}}
	if _, err := cloud.Driver().CreateMachine(context.Background(), &driver.CreateMachineRequest{Machine: machine, MachineClass: old, Secret: secret}); err != nil {
		t.Fatal(err)
	}
	set := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "md-a", Namespace: agentNS, OwnerReferences: controllerRef("MachineDeployment", "md")}}
	set.Spec.Template.Spec.Class.Name = "old"
	md := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: agentNS}}
	md.Spec.Template.Spec.Class.Name = "new"

	w := &agentWorld{t: t, clock: clk, cloud: cloud, target: fake.NewClientset()}
	w.vm = cloud.VMs()[0]
	w.agent, err = NewAgent(cloud, w.target, machinefake.NewSimpleClientset(), AgentOptions{Identity: agentIdentity})
	if err != nil {
		t.Fatal(err)
	}
	indexer := func(objs ...runtime.Object) cache.Indexer {
		i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			if err := i.Add(o); err != nil {
				t.Fatal(err)
			}
		}
		return i
	}
	w.nodes = indexer()
	w.agent.listers = agentListers{
		nodes:       corelisters.NewNodeLister(w.nodes),
		machines:    machinelisters.NewMachineLister(indexer(machine)),
		sets:        machinelisters.NewMachineSetLister(indexer(set)),
		deployments: machinelisters.NewMachineDeploymentLister(indexer(md)),
		classes:     machinelisters.NewMachineClassLister(indexer(old, updated)),
	}
	w.putNode(w.readyNode())
	return w
}

// readyNode is the VM's node as the machine controller leaves it for the
// agent, with the reason of an earlier failed round still on it.
func (w *agentWorld) readyNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: w.vm.NodeName, ResourceVersion: "1",
			Labels:      map[string]string{v1alpha1.SelectedForUpdateLabel: "true", "keep": "me"},
			Annotations: map[string]string{AnnotationSimulated: agentIdentity, v1alpha1.UpdateFailedReasonAnnotation: "old news"},
		},
		Spec: corev1.NodeSpec{ProviderID: w.vm.ProviderID, Unschedulable: true},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: v1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue, Reason: v1alpha1.ReadyForUpdate, Message: v1alpha1.ReadyForUpdateMessage,
		}}},
	}
}

// putNode makes node the API server's and the cache's.
func (w *agentWorld) putNode(node *corev1.Node) {
	w.t.Helper()
	if err := w.target.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("nodes"), "", node.Name); err != nil && !strings.Contains(err.Error(), "not found") {
		w.t.Fatal(err)
	}
	if err := w.target.Tracker().Add(node); err != nil {
		w.t.Fatal(err)
	}
	w.syncCache()
}

// syncCache makes the cache show the API server's node.
func (w *agentWorld) syncCache() {
	w.t.Helper()
	node := w.node()
	if err := w.nodes.Update(node); err != nil {
		w.t.Fatal(err)
	}
	w.target.ClearActions()
}

func (w *agentWorld) node() *corev1.Node {
	w.t.Helper()
	n, err := w.target.CoreV1().Nodes().Get(context.Background(), w.vm.NodeName, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *agentWorld) reconcile() workqueue.Result {
	w.t.Helper()
	res, err := w.agent.reconcile(context.Background(), w.vm.NodeName)
	if err != nil {
		w.t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (w *agentWorld) currentVM() VM {
	w.t.Helper()
	vm, ok := w.cloud.VM(w.vm.ProviderID)
	if !ok {
		w.t.Fatal("the VM is gone")
	}
	return vm
}

// patches returns the bodies of the node patches sent since the last
// syncCache.
func (w *agentWorld) patches() []string {
	var out []string
	for _, a := range w.target.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

func TestAgentIgnoresNodesItDoesNotServe(t *testing.T) {
	cases := map[string]struct {
		spec   func(*ProviderSpec)
		node   func(*corev1.Node)
		before func(*agentWorld)
	}{
		"not ready for update": {node: func(n *corev1.Node) { n.Status.Conditions[0].Reason = v1alpha1.SelectedForUpdate }},
		"no condition":         {node: func(n *corev1.Node) { n.Status.Conditions = nil }},
		"result already there": {node: func(n *corev1.Node) { n.Labels[v1alpha1.UpdateResultLabel] = v1alpha1.UpdateResultSuccessful }},
		"another kubelet's":    {node: func(n *corev1.Node) { n.Annotations[AnnotationSimulated] = "kubelet-b" }},
		"a real kubelet's":     {node: func(n *corev1.Node) { delete(n.Annotations, AnnotationSimulated) }},
		"class without agent":  {spec: func(s *ProviderSpec) { s.InPlaceUpdate = nil }},
		"agent off":            {spec: func(s *ProviderSpec) { s.InPlaceUpdate = &InPlaceUpdate{} }},
		"VM stopped": {before: func(w *agentWorld) {
			if err := w.cloud.StopVM(w.vm.ProviderID); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := agentSpec(oldVersion, "a")
			if tc.spec != nil {
				tc.spec(&spec)
			}
			w := newAgentWorld(t, spec, agentSpec(newVersion, "b"))
			if tc.node != nil {
				n := w.readyNode()
				tc.node(n)
				w.putNode(n)
			}
			if tc.before != nil {
				tc.before(w)
			}
			for range 2 {
				if res := w.reconcile(); res != (workqueue.Result{}) {
					t.Errorf("reconcile = %+v, want nothing to do", res)
				}
				w.clock.Step(time.Hour)
			}
			if p := w.patches(); len(p) > 0 {
				t.Errorf("the agent wrote to the node: %v", p)
			}
			if got := w.currentVM().KubeletVersion; got != oldVersion {
				t.Errorf("VM kubelet version = %s, want %s untouched", got, oldVersion)
			}
			if len(w.agent.pending) > 0 {
				t.Errorf("pending updates %v, want none", w.agent.pending)
			}
		})
	}
}

func TestAgentUpdatesAfterTheDelayAndLabelsSuccess(t *testing.T) {
	w := newAgentWorld(t, agentSpec(oldVersion, "a"), agentSpec(newVersion, "b"))
	if res := w.reconcile(); res.RequeueAfter != time.Minute {
		t.Fatalf("first reconcile = %+v, want a requeue after the update delay", res)
	}
	w.clock.Step(40 * time.Second)
	if res := w.reconcile(); res.RequeueAfter != 20*time.Second {
		t.Fatalf("reconcile 40s in = %+v, want a requeue after the 20s left", res)
	}
	if got := w.currentVM().KubeletVersion; got != oldVersion || len(w.patches()) > 0 {
		t.Fatalf("updated before the delay: version %s, patches %v", got, w.patches())
	}
	w.clock.Step(20 * time.Second)
	if res := w.reconcile(); res != (workqueue.Result{}) {
		t.Fatalf("reconcile when due = %+v, want done", res)
	}

	vm := w.currentVM()
	oldTags := ClassTags{Cluster: agentNS, Namespace: agentNS, Name: "old"}
	newTags := ClassTags{Cluster: agentNS, Namespace: agentNS, Name: "new"}
	if vm.KubeletVersion != newVersion || vm.Labels["pool"] != "b" || vm.UpdatedTo != newTags || !vm.UpdatedAt.Equal(w.clock.Now()) {
		t.Errorf("VM after the update: version %s, labels %v, updated to %v at %v", vm.KubeletVersion, vm.Labels, vm.UpdatedTo, vm.UpdatedAt)
	}
	if vm.Class != oldTags || vm.ProviderID != w.vm.ProviderID {
		t.Errorf("VM tags %v, provider ID %s: want the class of creation %v and the same VM", vm.Class, vm.ProviderID, oldTags)
	}
	patches := w.patches()
	if len(patches) != 1 {
		t.Fatalf("patches %v, want one", patches)
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(patches[0]), &sent); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{
		"labels":          map[string]any{v1alpha1.UpdateResultLabel: v1alpha1.UpdateResultSuccessful},
		"annotations":     map[string]any{v1alpha1.UpdateFailedReasonAnnotation: nil},
		"resourceVersion": "1",
	}}
	if diff := cmp.Diff(want, sent); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
	node := w.node()
	if !node.Spec.Unschedulable || node.Labels[v1alpha1.SelectedForUpdateLabel] != "true" || node.Labels["keep"] != "me" {
		t.Errorf("the agent touched what is not its own: unschedulable %v, labels %v", node.Spec.Unschedulable, node.Labels)
	}

	// Done: the labelled node is left alone, though its condition still
	// says ReadyForUpdate until the machine controller sees the result.
	w.syncCache()
	if res := w.reconcile(); res != (workqueue.Result{}) || len(w.patches()) > 0 || len(w.agent.pending) > 0 {
		t.Errorf("after success: reconcile %+v, patches %v, pending %v", res, w.patches(), w.agent.pending)
	}
}

func TestAgentFaultLabelsFailedAndRetries(t *testing.T) {
	w := newAgentWorld(t, agentSpec(oldVersion, "a"), agentSpec(newVersion, "b"))
	const reason = "kubelet is not healthy after in-place update"
	if _, err := w.cloud.InjectFault(Fault{Operation: OperationInPlaceUpdate, MachineName: "other", Code: driver.Internal}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.cloud.InjectFault(Fault{Operation: OperationInPlaceUpdate, MachineName: "m1", Code: driver.Internal, Message: reason, Times: 1}); err != nil {
		t.Fatal(err)
	}
	// A fault for every driver operation is not one for the agent's update.
	if _, err := w.cloud.InjectFault(Fault{Code: driver.Unavailable}); err != nil {
		t.Fatal(err)
	}
	w.reconcile()
	w.clock.Step(time.Minute)
	if res := w.reconcile(); res.RequeueAfter != DefaultInPlaceRetryDelay {
		t.Fatalf("reconcile of the failing update = %+v, want a retry after %v", res, DefaultInPlaceRetryDelay)
	}
	node := w.node()
	if node.Labels[v1alpha1.UpdateResultLabel] != v1alpha1.UpdateResultFailed || node.Annotations[v1alpha1.UpdateFailedReasonAnnotation] != reason {
		t.Errorf("node labels %v, annotations %v: want failed with the fault's message", node.Labels, node.Annotations)
	}
	if got := w.currentVM().KubeletVersion; got != oldVersion {
		t.Errorf("failed update changed the VM's version to %s", got)
	}
	if got := w.cloud.Calls(OperationInPlaceUpdate); got != 1 {
		t.Errorf("Calls(InPlaceUpdate) = %d, want 1", got)
	}

	// The failed label's event: the retry keeps its due time.
	w.syncCache()
	w.clock.Step(10 * time.Second)
	if res := w.reconcile(); res.RequeueAfter != 20*time.Second {
		t.Fatalf("reconcile of the failed node = %+v, want the retry 20s later", res)
	}
	w.clock.Step(20 * time.Second)
	if res := w.reconcile(); res != (workqueue.Result{}) {
		t.Fatalf("retry = %+v, want done", res)
	}
	node = w.node()
	if node.Labels[v1alpha1.UpdateResultLabel] != v1alpha1.UpdateResultSuccessful {
		t.Errorf("after the retry: labels %v, want successful", node.Labels)
	}
	if _, ok := node.Annotations[v1alpha1.UpdateFailedReasonAnnotation]; ok {
		t.Errorf("the failure's reason stayed: %v", node.Annotations)
	}
	if got := w.currentVM().KubeletVersion; got != newVersion {
		t.Errorf("VM version after the retry = %s, want %s", got, newVersion)
	}
}

func TestAgentFailsAnUpdateThatNeedsANewVM(t *testing.T) {
	next := agentSpec(newVersion, "b")
	next.Zone = "zone-b"
	w := newAgentWorld(t, agentSpec(oldVersion, "a"), next)
	w.reconcile()
	w.clock.Step(time.Minute)
	w.reconcile()
	node := w.node()
	reason := node.Annotations[v1alpha1.UpdateFailedReasonAnnotation]
	if node.Labels[v1alpha1.UpdateResultLabel] != v1alpha1.UpdateResultFailed || !strings.Contains(reason, "zone (zone-a to zone-b)") {
		t.Errorf("labels %v, reason %q: want failed, naming the zone", node.Labels, reason)
	}
	if vm := w.currentVM(); vm.KubeletVersion != oldVersion || !vm.UpdatedTo.IsZero() {
		t.Errorf("refused update changed the VM: %+v", vm)
	}
}

// The kubelet reports the new version at once, though its status is not
// due for minutes.
func TestKubeletReportsTheUpdatedVersion(t *testing.T) {
	w := newAgentWorld(t, agentSpec(oldVersion, "a"), agentSpec(newVersion, "b"))
	client := fake.NewClientset()
	r := newNodeReporter(client, agentIdentity, time.Hour, func(p time.Duration) time.Duration { return p })
	node, err := r.register(context.Background(), w.currentVM(), w.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.NodeInfo.KubeletVersion; got != oldVersion {
		t.Fatalf("registered with version %s, want %s", got, oldVersion)
	}
	w.reconcile()
	w.clock.Step(time.Minute)
	w.reconcile()
	vm := w.currentVM()
	if !versionChanged(vm, node) {
		t.Fatal("the kubelet does not see the version change")
	}
	if err := r.reportStatus(context.Background(), vm, node, w.clock.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Nodes().Get(context.Background(), node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.NodeInfo.KubeletVersion != newVersion {
		t.Errorf("reported version %s, want %s", got.Status.NodeInfo.KubeletVersion, newVersion)
	}
}
