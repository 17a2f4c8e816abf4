package drain

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var epoch = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

const testNode = "node-1"

// ---- object builders ----

func newNode(name string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(epoch.Add(-time.Hour)),
		}}},
	}
	for _, m := range mods {
		m(n)
	}
	return n
}

func notReadySinceAt(t time.Time) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(t),
		}}
	}
}

func attachedIDs(names ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for _, name := range names {
			n.Status.VolumesAttached = append(n.Status.VolumesAttached, corev1.AttachedVolume{Name: corev1.UniqueVolumeName(name)})
		}
	}
}

type podOpt func(*corev1.Pod)

func newPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-rs", UID: "uid-rs", Controller: ptrTo(true),
			}},
		},
		Spec: corev1.PodSpec{NodeName: testNode},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ptrTo[T any](v T) *T { return &v }

func inNamespace(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }
func onNode(n string) podOpt       { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func withUID(uid string) podOpt    { return func(p *corev1.Pod) { p.UID = types.UID(uid) } }
func withLabel(k, v string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }
func app(v string) podOpt          { return withLabel("app", v) }

func annotated(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func order(n int) podOpt { return annotated(OrderAnnotation, fmt.Sprint(n)) }

func daemonSet() podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "uid-ds", Controller: ptrTo(true),
		}}
	}
}

func unmanaged() podOpt { return func(p *corev1.Pod) { p.OwnerReferences = nil } }
func mirror() podOpt    { return annotated(corev1.MirrorPodAnnotationKey, "hash") }
func critical() podOpt {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }
}
func grace(secs int64) podOpt {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &secs }
}
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func notReady() podOpt {
	return func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }
}
func terminating(at time.Time) podOpt {
	return func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: at} }
}
func emptyDir() podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
}
func withClaim(claim string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v-" + claim,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
}

// newPDB returns a budget over app=<app> in default with the given status.
func newPDB(name, appLabel string, allowed, desired, current, expected int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": appLabel}}},
		Status: policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: 1, DisruptionsAllowed: allowed, DesiredHealthy: desired,
			CurrentHealthy: current, ExpectedPods: expected,
		},
	}
}

func newPVC(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv},
	}
}

func newPV(name, handle string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: "disk.example.com", VolumeHandle: handle},
		}},
	}
}

func newVA(pv, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "va-" + pv + "-" + node, UID: types.UID("uid-va-" + pv + "-" + node)},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "disk.example.com", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptrTo(pv)},
		},
		Status: storagev1.VolumeAttachmentStatus{Attached: true},
	}
}

// ---- a fake cluster with API-server-like eviction and deletion ----

var (
	podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	pdbsGVR = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
	vasGVR  = schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"}
)

// cluster wraps a fake clientset whose eviction and pod deletion behave
// like the API server's: UID preconditions (409), PodDisruptionBudgets
// (429, decrementing disruptionsAllowed), several budgets (500), and
// graceful termination (a deletionTimestamp; the test plays the kubelet).
type cluster struct {
	t      testing.TB
	client *fake.Clientset
	clock  *clocktesting.FakeClock

	mu        sync.Mutex
	evictions []evictionCall
	deletions []deletionCall
	// evictErr, when set, answers evictions instead of the simulation.
	evictErr func(pod *corev1.Pod) error
}

type evictionCall struct {
	Pod   string
	UID   types.UID
	Grace *int64
	Code  int
}

type deletionCall struct {
	Pod   string
	UID   types.UID
	Grace int64
	At    time.Time
}

func newCluster(t testing.TB, objs ...runtime.Object) *cluster {
	c := &cluster{t: t, client: fake.NewClientset(objs...), clock: clocktesting.NewFakeClock(epoch)}
	c.client.PrependReactor("create", "pods", c.evictReactor)
	c.client.PrependReactor("delete", "pods", c.deleteReactor)
	return c
}

func (c *cluster) drainer(opts Options) *Drainer {
	c.t.Helper()
	if opts.Clock == nil {
		opts.Clock = c.clock
	}
	d, err := New(c.client, opts)
	if err != nil {
		c.t.Fatalf("New: %v", err)
	}
	return d
}

func (c *cluster) evictReactor(action k8stesting.Action) (bool, runtime.Object, error) {
	if action.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
	code, err := c.evict(ev)
	c.mu.Lock()
	call := evictionCall{Pod: ev.Namespace + "/" + ev.Name, Code: code}
	if ev.DeleteOptions != nil {
		if ev.DeleteOptions.Preconditions != nil && ev.DeleteOptions.Preconditions.UID != nil {
			call.UID = *ev.DeleteOptions.Preconditions.UID
		}
		call.Grace = ev.DeleteOptions.GracePeriodSeconds
	}
	c.evictions = append(c.evictions, call)
	c.mu.Unlock()
	return true, nil, err
}

func (c *cluster) evict(ev *policyv1.Eviction) (int, error) {
	tr := c.client.Tracker()
	obj, err := tr.Get(podsGVR, ev.Namespace, ev.Name)
	if err != nil {
		return 404, err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	if ev.DeleteOptions == nil || ev.DeleteOptions.Preconditions == nil || ev.DeleteOptions.Preconditions.UID == nil {
		c.t.Errorf("eviction of %s/%s without a UID precondition", ev.Namespace, ev.Name)
	} else if *ev.DeleteOptions.Preconditions.UID != pod.UID {
		return 409, apierrors.NewConflict(podsGVR.GroupResource(), ev.Name,
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *ev.DeleteOptions.Preconditions.UID, pod.UID))
	}
	if c.evictErr != nil {
		if err := c.evictErr(pod); err != nil {
			if s, ok := err.(apierrors.APIStatus); ok {
				return int(s.Status().Code), err
			}
			return 0, err
		}
	}
	if pod.DeletionTimestamp == nil {
		var pdbs []*policyv1.PodDisruptionBudget
		list, _ := tr.List(pdbsGVR, policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), pod.Namespace)
		for i := range list.(*policyv1.PodDisruptionBudgetList).Items {
			pdb := &list.(*policyv1.PodDisruptionBudgetList).Items[i]
			sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if sel.Matches(labels.Set(pod.Labels)) {
				pdbs = append(pdbs, pdb)
			}
		}
		if len(pdbs) > 1 {
			return 500, apierrors.NewInternalError(fmt.Errorf("this pod has more than one PodDisruptionBudget, which the eviction subresource does not support"))
		}
		if len(pdbs) == 1 && podReady(pod) {
			pdb := pdbs[0].DeepCopy()
			if pdb.Status.DisruptionsAllowed <= 0 {
				err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
				err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
					Type: policyv1.DisruptionBudgetCause,
					Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently",
						pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy),
				})
				return 429, err
			}
			pdb.Status.DisruptionsAllowed--
			if pdb.Status.DisruptedPods == nil {
				pdb.Status.DisruptedPods = map[string]metav1.Time{}
			}
			pdb.Status.DisruptedPods[pod.Name] = metav1.NewTime(c.clock.Now())
			if err := tr.Update(pdbsGVR, pdb, pdb.Namespace); err != nil {
				return 500, err
			}
		}
	}
	g := podGrace(pod)
	if ev.DeleteOptions.GracePeriodSeconds != nil {
		g = time.Duration(*ev.DeleteOptions.GracePeriodSeconds) * time.Second
	}
	return 201, c.markTerminating(pod, g)
}

func (c *cluster) deleteReactor(action k8stesting.Action) (bool, runtime.Object, error) {
	del := action.(k8stesting.DeleteActionImpl)
	tr := c.client.Tracker()
	obj, err := tr.Get(podsGVR, del.Namespace, del.Name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	opts := del.DeleteOptions
	call := deletionCall{Pod: del.Namespace + "/" + del.Name, At: c.clock.Now(), Grace: -1}
	if opts.Preconditions != nil && opts.Preconditions.UID != nil {
		call.UID = *opts.Preconditions.UID
	}
	if opts.GracePeriodSeconds != nil {
		call.Grace = *opts.GracePeriodSeconds
	}
	c.mu.Lock()
	c.deletions = append(c.deletions, call)
	c.mu.Unlock()
	if call.UID == "" {
		c.t.Errorf("deletion of %s without a UID precondition", call.Pod)
	} else if call.UID != pod.UID {
		return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), del.Name, fmt.Errorf("precondition failed"))
	}
	if call.Grace == 0 {
		return true, nil, tr.Delete(podsGVR, del.Namespace, del.Name)
	}
	g := podGrace(pod)
	if call.Grace > 0 {
		g = time.Duration(call.Grace) * time.Second
	}
	return true, nil, c.markTerminating(pod, g)
}

// markTerminating sets the deletion timestamp like the API server: now
// plus the grace period, unless an earlier one is set.
func (c *cluster) markTerminating(pod *corev1.Pod, g time.Duration) error {
	at := metav1.NewTime(c.clock.Now().Add(g).Truncate(time.Second))
	if pod.DeletionTimestamp == nil || at.Before(pod.DeletionTimestamp) {
		pod.DeletionTimestamp = &at
		secs := int64(g / time.Second)
		pod.DeletionGracePeriodSeconds = &secs
	}
	return c.client.Tracker().Update(podsGVR, pod, pod.Namespace)
}

// kubelet removes every terminating pod, like a kubelet that finished.
func (c *cluster) kubelet() []string {
	c.t.Helper()
	var gone []string
	for _, pod := range c.pods() {
		if pod.DeletionTimestamp != nil {
			c.removePod(pod.Namespace, pod.Name)
			gone = append(gone, pod.Namespace+"/"+pod.Name)
		}
	}
	return gone
}

func (c *cluster) removePod(ns, name string) {
	c.t.Helper()
	if err := c.client.Tracker().Delete(podsGVR, ns, name); err != nil {
		c.t.Fatalf("removing pod %s/%s: %v", ns, name, err)
	}
}

func (c *cluster) pods() []corev1.Pod {
	c.t.Helper()
	list, err := c.client.Tracker().List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), "")
	if err != nil {
		c.t.Fatalf("listing pods: %v", err)
	}
	return list.(*corev1.PodList).Items
}

func (c *cluster) pod(ns, name string) *corev1.Pod {
	obj, err := c.client.Tracker().Get(podsGVR, ns, name)
	if err != nil {
		return nil
	}
	return obj.(*corev1.Pod)
}

func (c *cluster) add(obj runtime.Object) {
	c.t.Helper()
	if err := c.client.Tracker().Add(obj); err != nil {
		c.t.Fatalf("adding object: %v", err)
	}
}

func (c *cluster) deleteVA(pv, node string) {
	c.t.Helper()
	if err := c.client.Tracker().Delete(vasGVR, "", "va-"+pv+"-"+node); err != nil {
		c.t.Fatalf("deleting VolumeAttachment: %v", err)
	}
}

func (c *cluster) evictionCalls() []evictionCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]evictionCall(nil), c.evictions...)
}

func (c *cluster) deletionCalls() []deletionCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]deletionCall(nil), c.deletions...)
}

func (c *cluster) resetCalls() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evictions, c.deletions = nil, nil
}

// pass runs one Pass and fails the test on an error.
func (c *cluster) pass(d *Drainer, st State) Result {
	c.t.Helper()
	res, err := d.Pass(context.Background(), testNode, st)
	if err != nil {
		c.t.Fatalf("Pass: %v", err)
	}
	return res
}

// actions maps pod names to their actions, for compact assertions.
func actions(p Plan) map[string]Action {
	out := map[string]Action{}
	for _, d := range p.Decisions {
		out[d.Pod.Name] = d.Action
	}
	return out
}

func eventTypes(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, string(e.Type)+" "+e.Pod.Name)
	}
	return out
}

func jsonRoundTrip(st State) (State, error) {
	data, err := json.Marshal(st)
	if err != nil {
		return State{}, err
	}
	var out State
	err = json.Unmarshal(data, &out)
	return out, err
}

// begun gives a state written by hand the start a drain that recorded its
// progress would have had: an hour before now. Decide distrusts progress
// without a start.
func begun(st State, now time.Time) State {
	if st.start.IsZero() && !recordsNothing(st) {
		st.start = now.Add(-time.Hour)
	}
	return st
}

// stateFields lets go-cmp compare States, whose fields are unexported.
var stateFields = cmp.AllowUnexported(State{})
