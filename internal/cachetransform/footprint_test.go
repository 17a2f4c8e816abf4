package cachetransform

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/cache"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/testsupport/heaptest"
)

// BenchmarkCachedObject decodes machines and nodes as the informers do
// (machines from JSON, nodes from protobuf), passes them through a
// transform and keeps them, as a cache does. retained-B/object is the heap
// each kept object costs; ns/op is decoding and transform together.
func BenchmarkCachedObject(b *testing.B) {
	for _, kind := range []struct {
		name   string
		encode func(i int) []byte
		decode func([]byte) any
	}{
		{"machine", encodedMachine, func(data []byte) any {
			m := &v1alpha1.Machine{}
			if err := utiljson.Unmarshal(data, m); err != nil {
				panic(err)
			}
			return m
		}},
		{"node", encodedNode, func(data []byte) any {
			n := &corev1.Node{}
			if err := n.Unmarshal(data); err != nil {
				panic(err)
			}
			return n
		}},
	} {
		for _, tr := range []struct {
			name string
			fn   func() cache.TransformFunc
		}{
			{"DropManagedFields", func() cache.TransformFunc { return DropManagedFields }},
			{"New", New},
		} {
			b.Run(kind.name+"/"+tr.name, func(b *testing.B) {
				encoded := make([][]byte, b.N)
				for i := range encoded {
					encoded[i] = kind.encode(i)
				}
				transform := tr.fn()
				kept := make([]any, b.N)
				heaptest.Retained(b, "object", func() any {
					for i := range b.N {
						kept[i], _ = transform(kind.decode(encoded[i]))
					}
					return kept
				})
				runtime.KeepAlive(encoded)
			})
		}
	}
}

// encodedMachine is machine i of a deployment's set, Running, as the
// machine controller leaves it.
func encodedMachine(i int) []byte {
	name := fmt.Sprintf("pool-a-65784469d5-%05d", i)
	t := metav1.NewTime(time.Date(2026, 11, 25, 21, 44, 54, 0, time.UTC))
	yes := true
	m := &v1alpha1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, GenerateName: "pool-a-65784469d5-", Namespace: "shoot--garden--prod", UID: types.UID(fmt.Sprintf("8bfddc81-d10f-4db6-b85b-%012d", i)),
			ResourceVersion: fmt.Sprint(100000 + i), Generation: 2, CreationTimestamp: t,
			Labels:          map[string]string{"machine-template-hash": "65784469d5", "pool": "pool-a", "node": name},
			Annotations:     map[string]string{"machinepriority.machine.sapcloud.io": "3", "mcmkit.io/creation-started": t.Add(-time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)},
			Finalizers:      []string{"machine.sapcloud.io/machine-controller-manager"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "machine.sapcloud.io/v1alpha1", Kind: "MachineSet", Name: "pool-a-65784469d5", UID: "d060f3ed-cbfb-450e-99f8-2ccc4dbf4c95", Controller: &yes, BlockOwnerDeletion: &yes}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "mcm", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "machine.sapcloud.io/v1alpha1", FieldsType: "FieldsV1"}},
		},
		Spec: v1alpha1.MachineSpec{
			Class:      v1alpha1.ClassSpec{Kind: "MachineClass", Name: "pool-a-v2"},
			ProviderID: "aws:///eu-west-1a/i-0" + fmt.Sprintf("%016x", i),
			NodeTemplateSpec: v1alpha1.NodeTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"pool": "pool-a", "worker.gardener.cloud/pool": "pool-a"}},
			},
		},
		Status: v1alpha1.MachineStatus{
			Conditions:    kubeletConditions(t),
			LastOperation: v1alpha1.LastOperation{Description: "Machine " + name + " successfully joined the cluster in 52.19s", LastUpdateTime: t, State: v1alpha1.MachineStateSuccessful, Type: v1alpha1.MachineOperationCreate},
			CurrentStatus: v1alpha1.CurrentStatus{Phase: v1alpha1.MachineRunning, LastUpdateTime: t},
		},
	}
	data, err := utiljson.Marshal(m)
	if err != nil {
		panic(err)
	}
	return data
}

// encodedNode is the node of machine i as a kubelet reports it (without
// images: a real node's list would only make the untrimmed figure larger).
func encodedNode(i int) []byte {
	name := fmt.Sprintf("pool-a-65784469d5-%05d", i)
	t := metav1.NewTime(time.Date(2026, 11, 25, 21, 44, 54, 0, time.UTC))
	resources := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("50Gi")}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(fmt.Sprintf("fa0780bb-ccba-4f90-be80-%012d", i)), ResourceVersion: fmt.Sprint(200000 + i), CreationTimestamp: t,
			Labels: map[string]string{
				"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
				"kubernetes.io/hostname": name, "node.gardener.cloud/machine-name": name, "node.kubernetes.io/instance-type": "m5.xlarge",
				"pool": "pool-a", "worker.gardener.cloud/pool": "pool-a", "topology.kubernetes.io/zone": "eu-west-1a", "topology.kubernetes.io/region": "eu-west-1",
			},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
			Finalizers:  []string{"node.machine.sapcloud.io/machine-controller"},
		},
		Spec: corev1.NodeSpec{ProviderID: "aws:///eu-west-1a/i-0" + fmt.Sprintf("%016x", i), PodCIDR: fmt.Sprintf("100.64.%d.0/24", i%256)},
		Status: corev1.NodeStatus{
			Capacity: resources, Allocatable: resources, Phase: "",
			Conditions: kubeletConditions(t),
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.250.%d.%d", i/256, i%256)}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("ec2%029x", i), BootID: fmt.Sprintf("%032x", i+1),
				KernelVersion: "6.6.62-cloud-amd64", OSImage: "Garden Linux 1592.4", ContainerRuntimeVersion: "containerd://1.7.24",
				KubeletVersion: "v1.37.1", OperatingSystem: "linux", Architecture: "amd64",
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		},
	}
	data, err := n.Marshal()
	if err != nil {
		panic(err)
	}
	return data
}

func kubeletConditions(t metav1.Time) []corev1.NodeCondition {
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: message, LastHeartbeatTime: t, LastTransitionTime: t}
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}
