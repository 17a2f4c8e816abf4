package cachetransform

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

func TestDropManagedFields(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	got, err := DropManagedFields(pod)
	if err != nil {
		t.Fatal(err)
	}
	if mf := got.(*corev1.Pod).ManagedFields; mf != nil {
		t.Errorf("managed fields kept: %v", mf)
	}
	// Not an object (a tombstone, say): passed through.
	if got, err := DropManagedFields("x"); err != nil || got != "x" {
		t.Errorf("DropManagedFields(non-object) = %v, %v", got, err)
	}
}

// TestSetOn: an informer that has not started gets the transform, so its
// cache holds objects without managed fields.
func TestSetOn(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	f := informers.NewSharedInformerFactory(fake.NewSimpleClientset(node), 0)
	inf := f.Core().V1().Nodes().Informer()
	SetOn(inf)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.Shutdown() }()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("cache did not sync")
	}
	got, _ := f.Core().V1().Nodes().Lister().Get("n")
	if got == nil || got.ManagedFields != nil {
		t.Fatalf("cached node %v still has managed fields", got)
	}
	// Started informers are left alone: no panic, nothing changes.
	SetOn(inf)
}

// TestTrimmedNodeStatus: a node keeps the status fields mcm reads and loses
// the others; everything else about it is kept, and the input is not
// written to.
func TestTrimmedNodeStatus(t *testing.T) {
	const virtual = corev1.ResourceName("example.com/licenses")
	record := map[string]string{v1alpha1.LastAppliedVirtualCapacityAnnotation: `{"example.com/licenses":"4"}`}
	kept := corev1.NodeStatus{
		Capacity:        corev1.ResourceList{virtual: resource.MustParse("4")},
		Phase:           corev1.NodeRunning,
		Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "kubelet is ready"}},
		VolumesAttached: []corev1.AttachedVolume{{Name: "kubernetes.io/csi/disk-1", DevicePath: "/dev/xvdb"}},
	}
	full := *kept.DeepCopy()
	full.Capacity[corev1.ResourceCPU] = resource.MustParse("2")
	full.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")}
	full.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	full.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.1", OSImage: "Garden Linux"}
	full.Images = []corev1.ContainerImage{{Names: []string{"registry.example/app@sha256:abc", "registry.example/app:1"}, SizeBytes: 1 << 30}}
	full.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}
	full.VolumesInUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/disk-1"}
	withoutRecord := kept
	withoutRecord.Capacity = nil

	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        corev1.NodeStatus
	}{
		{name: "virtual capacity recorded: only its entries kept", annotations: record, want: kept},
		{name: "no record: no capacity kept", want: withoutRecord},
		{name: "unreadable record: no capacity kept", annotations: map[string]string{v1alpha1.LastAppliedVirtualCapacityAnnotation: "{"}, want: withoutRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, Annotations: tc.annotations}, Spec: corev1.NodeSpec{ProviderID: "sim:///n"}, Status: full}
			orig := node.DeepCopy()
			got, err := New()(node)
			if err != nil {
				t.Fatal(err)
			}
			want := &corev1.Node{ObjectMeta: orig.ObjectMeta, Spec: orig.Spec, Status: tc.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("trimmed node (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orig, node); diff != "" {
				t.Errorf("the input node changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCompactCopies: a machine and a node come out of the transform equal
// to what went in, but for managed fields and the node's dropped status,
// and the input is not written to; another object's equal strings, maps
// and owner references are the first one's, and a third object of other
// contents shares none of them.
func TestCompactCopies(t *testing.T) {
	transform := New()
	for _, tc := range []struct {
		name    string
		objects func(i int) runtime.Object
		want    func(runtime.Object) runtime.Object
		strings func(runtime.Object) []string
		// shared are the maps and slices that repeat whole.
		shared func(runtime.Object) []unsafe.Pointer
	}{
		{
			name:    "machine",
			objects: func(i int) runtime.Object { return fullMachine(i) },
			want: func(o runtime.Object) runtime.Object {
				m := o.DeepCopyObject().(*v1alpha1.Machine)
				m.ManagedFields = nil
				return m
			},
			strings: func(o runtime.Object) []string {
				m := o.(*v1alpha1.Machine)
				c := m.Status.Conditions[0]
				return []string{m.Labels["pool"], m.Annotations["team"], m.Finalizers[0], m.OwnerReferences[0].Name, m.Spec.Class.Name,
					m.Spec.NodeTemplateSpec.Labels["pool"], m.Spec.NodeTemplateSpec.Spec.Taints[0].Key, c.Reason, c.Message, string(m.Status.CurrentStatus.Phase)}
			},
			shared: func(o runtime.Object) []unsafe.Pointer {
				m := o.(*v1alpha1.Machine)
				tmpl := m.Spec.NodeTemplateSpec
				return []unsafe.Pointer{mapPointer(m.Annotations), mapPointer(tmpl.Labels), mapPointer(tmpl.Annotations), unsafe.Pointer(&m.OwnerReferences[0])}
			},
		},
		{
			name:    "node",
			objects: func(i int) runtime.Object { return fullNode(i) },
			want: func(o runtime.Object) runtime.Object {
				n := o.DeepCopyObject().(*corev1.Node)
				n.ManagedFields = nil
				n.Status = corev1.NodeStatus{Phase: n.Status.Phase, Conditions: n.Status.Conditions, VolumesAttached: n.Status.VolumesAttached}
				return n
			},
			strings: func(o runtime.Object) []string {
				n := o.(*corev1.Node)
				c := n.Status.Conditions[0]
				return []string{n.Labels["pool"], n.Annotations["team"], n.Finalizers[0], n.Spec.Taints[0].Key, c.Reason, c.Message}
			},
			shared: func(o runtime.Object) []unsafe.Pointer {
				n := o.(*corev1.Node)
				return []unsafe.Pointer{mapPointer(n.Annotations), unsafe.Pointer(&n.OwnerReferences[0])}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []runtime.Object
			for i := range 3 {
				in := tc.objects(i)
				orig := in.DeepCopyObject()
				out, err := transform(in)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want(orig), out); diff != "" {
					t.Errorf("object %d (-want +got):\n%s", i, diff)
				}
				if diff := cmp.Diff(orig, in); diff != "" {
					t.Errorf("object %d: the input changed (-before +after):\n%s", i, diff)
				}
				got = append(got, out.(runtime.Object))
			}
			first, second, other := tc.strings(got[0]), tc.strings(got[1]), tc.strings(got[2])
			for i := range first {
				if unsafe.StringData(first[i]) != unsafe.StringData(second[i]) {
					t.Errorf("string %q of the second object is a copy of its own", second[i])
				}
				if unsafe.StringData(first[i]) == unsafe.StringData(other[i]) {
					t.Errorf("string %q of an object with other strings is the first one's", other[i])
				}
			}
			firstP, secondP, otherP := tc.shared(got[0]), tc.shared(got[1]), tc.shared(got[2])
			for i := range firstP {
				if firstP[i] != secondP[i] {
					t.Errorf("map or slice %d of the second object is a copy of its own", i)
				}
				if firstP[i] == otherP[i] {
					t.Errorf("map or slice %d of an object with other contents is the first one's", i)
				}
			}
		})
	}
}

// TestTableBound: each of a table's parts never holds more entries nor
// more bytes of keys than its bounds, keeps no key longer than maxKey,
// and keeps sharing after it started over.
func TestTableBound(t *testing.T) {
	type part struct {
		name  string
		held  func(*table) (entries, bytes, maxEntries, maxBytes int)
		add   func(*table, string) // adds a value made of s
		share func(*table) bool    // whether an equal value added twice is shared
	}
	parts := []part{
		{
			name: "strings",
			held: func(tb *table) (int, int, int, int) {
				return len(tb.strings.entries), tb.strings.bytes, tb.strings.maxEntries, tb.strings.maxBytes
			},
			add: func(tb *table, s string) { tb.intern(s) },
			share: func(tb *table) bool {
				return unsafe.StringData(tb.intern(strings.Repeat("x", 3))) == unsafe.StringData(tb.intern(strings.Repeat("x", 3)))
			},
		},
		{
			name: "maps",
			held: func(tb *table) (int, int, int, int) {
				return len(tb.maps.entries), tb.maps.bytes, tb.maps.maxEntries, tb.maps.maxBytes
			},
			add: func(tb *table, s string) { tb.stringMap(map[string]string{"k": s}) },
			share: func(tb *table) bool {
				a, b := tb.stringMap(map[string]string{"a": "1", "b": "2"}), tb.stringMap(map[string]string{"b": "2", "a": "1"})
				return samePointer(a, b)
			},
		},
		{
			name: "owner references",
			held: func(tb *table) (int, int, int, int) {
				return len(tb.owners.entries), tb.owners.bytes, tb.owners.maxEntries, tb.owners.maxBytes
			},
			add: func(tb *table, s string) { tb.ownerReferences([]metav1.OwnerReference{{Name: s}}) },
			share: func(tb *table) bool {
				a, b := tb.ownerReferences([]metav1.OwnerReference{{Name: "set"}}), tb.ownerReferences([]metav1.OwnerReference{{Name: "set"}})
				return &a[0] == &b[0]
			},
		},
	}
	for _, p := range parts {
		for _, length := range []int{8, maxKey - 16} { // the count bounds, then the bytes
			t.Run(fmt.Sprintf("%s of %d bytes", p.name, length), func(t *testing.T) {
				tb := newTable()
				// Three times what either bound lets the table hold.
				_, _, maxN, maxB := p.held(tb)
				for i := range 3 * min(maxN, maxB/length+1) {
					p.add(tb, fmt.Sprintf("%0*d", length, i))
					if n, b, maxN, maxB := p.held(tb); n > maxN || b > maxB {
						t.Fatalf("after %d distinct values: %d entries of %d bytes, more than %d or %d", i+1, n, b, maxN, maxB)
					}
				}
				if !p.share(tb) {
					t.Error("equal values added after the table started over are not shared")
				}
			})
		}
		t.Run(p.name+" too long to keep", func(t *testing.T) {
			tb := newTable()
			p.add(tb, strings.Repeat("y", maxKey+1))
			if n, _, _, _ := p.held(tb); n != 0 {
				t.Errorf("a value of more than %d bytes was kept", maxKey)
			}
		})
	}
}

// TestSharingTellsApart: values that differ only where one key could be
// mistaken for another are not shared.
func TestSharingTellsApart(t *testing.T) {
	tb := newTable()
	if a, b := tb.stringMap(map[string]string{"a": "bc"}), tb.stringMap(map[string]string{"ab": "c"}); samePointer(a, b) {
		t.Errorf("maps %v and %v are one", a, b)
	}
	if a, b := tb.stringMap(map[string]string{"a": "", "b": ""}), tb.stringMap(map[string]string{"a": "b"}); samePointer(a, b) {
		t.Errorf("maps %v and %v are one", a, b)
	}
	yes, no := true, false
	flags := []*bool{nil, &no, &yes}
	seen := map[*metav1.OwnerReference][2]*bool{}
	for _, controller := range flags {
		for _, block := range flags {
			refs := tb.ownerReferences([]metav1.OwnerReference{{Name: "set", Controller: controller, BlockOwnerDeletion: block}})
			if prev, ok := seen[&refs[0]]; ok {
				t.Errorf("owner references with controller %v, blockOwnerDeletion %v are those with %v, %v", controller, block, prev[0], prev[1])
			}
			seen[&refs[0]] = [2]*bool{controller, block}
		}
	}
}

// samePointer reports whether a and b are one map.
func samePointer(a, b map[string]string) bool {
	return mapPointer(a) == mapPointer(b)
}

func mapPointer(m map[string]string) unsafe.Pointer {
	return reflect.ValueOf(m).UnsafePointer()
}

// fullMachine is a machine with every field set; i picks the strings a
// machine of another set, pool and class would have where they repeat
// (i = 0 and 1 are of one set), and its own name and UID.
func fullMachine(i int) *v1alpha1.Machine {
	g := strconv.Itoa(i / 2)
	own := strconv.Itoa(i)
	d := &metav1.Duration{Duration: time.Minute}
	return &v1alpha1.Machine{
		ObjectMeta: fullMeta("m"+own, g),
		Spec: v1alpha1.MachineSpec{
			Class:      v1alpha1.ClassSpec{APIGroup: "machine.sapcloud.io", Kind: "MachineClass", Name: "class-" + g},
			ProviderID: "sim:///zone/m" + own,
			NodeTemplateSpec: v1alpha1.NodeTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pool": "pool-" + g}, Annotations: map[string]string{"team": "team-" + g}},
				Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "dedicated-" + g, Value: "db", Effect: corev1.TaintEffectNoSchedule}}},
			},
			MachineConfiguration: &v1alpha1.MachineConfiguration{MachineDrainTimeout: d, MachineHealthTimeout: d, MachineCreationTimeout: d},
		},
		Status: v1alpha1.MachineStatus{
			Addresses:      []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0." + own}},
			Conditions:     fullConditions(g),
			LastOperation:  v1alpha1.LastOperation{Description: "created m" + own, State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationCreate, ErrorCode: "code-" + g, LastUpdateTime: metav1.Unix(1, 0)},
			CurrentStatus:  v1alpha1.CurrentStatus{Phase: v1alpha1.MachinePhase("Phase" + g), TimeoutActive: true, LastUpdateTime: metav1.Unix(2, 0)},
			LastKnownState: "state-" + own,
		},
	}
}

// fullNode is a node with every field mcm's caches keep set, as
// fullMachine.
func fullNode(i int) *corev1.Node {
	g := strconv.Itoa(i / 2)
	own := strconv.Itoa(i)
	return &corev1.Node{
		ObjectMeta: fullMeta("n"+own, g),
		Spec: corev1.NodeSpec{
			ProviderID: "sim:///zone/m" + own, Unschedulable: true,
			Taints: []corev1.Taint{{Key: "dedicated-" + g, Value: "db", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{}}},
		},
		Status: corev1.NodeStatus{
			Phase:           corev1.NodeRunning,
			Conditions:      fullConditions(g),
			VolumesAttached: []corev1.AttachedVolume{{Name: corev1.UniqueVolumeName("disk-" + own), DevicePath: "/dev/xvdb"}},
			NodeInfo:        corev1.NodeSystemInfo{KubeletVersion: "v1.37.1"},
		},
	}
}

func fullMeta(name, g string) metav1.ObjectMeta {
	now := metav1.Unix(3, 0)
	grace := int64(30)
	yes := true
	return metav1.ObjectMeta{
		Name: name, GenerateName: "set-" + g + "-", Namespace: "ns-" + g, UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 2,
		CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace,
		Labels:          map[string]string{"pool": "pool-" + g, "node": name},
		Annotations:     map[string]string{"team": "team-" + g},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "machine.sapcloud.io/v1alpha1", Kind: "MachineSet", Name: "set-" + g, UID: types.UID("uid-set-" + g), Controller: &yes}},
		Finalizers:      []string{"finalizer-" + g},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
}

func fullConditions(g string) []corev1.NodeCondition {
	return []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Ready-" + g, Message: "kubelet is posting ready status " + g, LastHeartbeatTime: metav1.Unix(4, 0), LastTransitionTime: metav1.Unix(5, 0)},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "Sufficient-" + g},
	}
}

// TestScratchKeepsNothing: building a map's key leaves no string of the map
// in the table's scratch space, which outlives the object.
func TestScratchKeepsNothing(t *testing.T) {
	tb := newTable()
	tb.stringMap(map[string]string{"pool": "a", "zone": "b"})
	for i, s := range tb.sorted[:cap(tb.sorted)] {
		if s != "" {
			t.Errorf("scratch slot %d keeps %q", i, s)
		}
	}
}
