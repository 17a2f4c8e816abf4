package drain

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
)

// Listers are optional informer caches. A nil field means reads go to the
// API server: a paginated LIST of the node's pods (field selector
// spec.nodeName), per-namespace LISTs of PodDisruptionBudgets, GETs of the
// node, claims and volumes, and a LIST of all VolumeAttachments when
// volumes matter. With every field set, a pass reads nothing from the API
// server: its only requests are the cordon patch (when the node is not
// cordoned yet), evictions and deletions. ListersFromFactory sets them all.
// Objects from listers are never modified.
type Listers struct {
	// Pods is the indexer of a pod informer. With an index named
	// NodeNameIndex (see AddNodeNameIndex) it is used directly; without
	// one every cached pod is scanned.
	Pods                   cache.Indexer
	Nodes                  corelisters.NodeLister
	PodDisruptionBudgets   policylisters.PodDisruptionBudgetLister
	PersistentVolumeClaims corelisters.PersistentVolumeClaimLister
	PersistentVolumes      corelisters.PersistentVolumeLister
	// VolumeAttachments is the indexer of a VolumeAttachment informer.
	// With an index named VolumeAttachmentNodeIndex (see
	// AddVolumeAttachmentNodeIndex) the node's attachments are looked up
	// directly; without one every cached attachment is scanned.
	VolumeAttachments cache.Indexer
}

// NodeNameIndex is the name of the pod index by spec.nodeName that
// Listers.Pods may carry.
const NodeNameIndex = "spec.nodeName"

// VolumeAttachmentNodeIndex is the name of the VolumeAttachment index by
// spec.nodeName that Listers.VolumeAttachments may carry.
const VolumeAttachmentNodeIndex = "spec.nodeName"

// AddNodeNameIndex adds NodeNameIndex to a pod informer, unless it has
// an index of that name already. Call it before starting the informer.
func AddNodeNameIndex(podInformer cache.SharedIndexInformer) error {
	if hasIndex(podInformer, NodeNameIndex) {
		return nil
	}
	err := podInformer.AddIndexers(cache.Indexers{NodeNameIndex: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{pod.Spec.NodeName}, nil
	}})
	if err != nil {
		return fmt.Errorf("adding pod index %s: %w", NodeNameIndex, err)
	}
	return nil
}

// AddVolumeAttachmentNodeIndex adds VolumeAttachmentNodeIndex to a
// VolumeAttachment informer, unless it has an index of that name already.
// Call it before starting the informer.
func AddVolumeAttachmentNodeIndex(vaInformer cache.SharedIndexInformer) error {
	if hasIndex(vaInformer, VolumeAttachmentNodeIndex) {
		return nil
	}
	err := vaInformer.AddIndexers(cache.Indexers{VolumeAttachmentNodeIndex: func(obj any) ([]string, error) {
		va, ok := obj.(*storagev1.VolumeAttachment)
		if !ok || va.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{va.Spec.NodeName}, nil
	}})
	if err != nil {
		return fmt.Errorf("adding VolumeAttachment index %s: %w", VolumeAttachmentNodeIndex, err)
	}
	return nil
}

// ListersFromFactory returns Listers with every field set from the
// informers of f, and adds NodeNameIndex and VolumeAttachmentNodeIndex to
// its pod and VolumeAttachment informers. Call it before f.Start, then
// wait for f's caches to sync before the first pass.
func ListersFromFactory(f informers.SharedInformerFactory) (Listers, error) {
	pods := f.Core().V1().Pods().Informer()
	if err := AddNodeNameIndex(pods); err != nil {
		return Listers{}, err
	}
	vas := f.Storage().V1().VolumeAttachments().Informer()
	if err := AddVolumeAttachmentNodeIndex(vas); err != nil {
		return Listers{}, err
	}
	return Listers{
		Pods:                   pods.GetIndexer(),
		Nodes:                  f.Core().V1().Nodes().Lister(),
		PodDisruptionBudgets:   f.Policy().V1().PodDisruptionBudgets().Lister(),
		PersistentVolumeClaims: f.Core().V1().PersistentVolumeClaims().Lister(),
		PersistentVolumes:      f.Core().V1().PersistentVolumes().Lister(),
		VolumeAttachments:      vas.GetIndexer(),
	}, nil
}

// FactoryInformers are the informers of f that ListersFromFactory reads
// from. A caller that starts f waits for all of them to sync before the
// first pass: a pod cache that has not synced yet looks like a drained
// node.
func FactoryInformers(f informers.SharedInformerFactory) []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{
		f.Core().V1().Pods().Informer(),
		f.Core().V1().Nodes().Informer(),
		f.Policy().V1().PodDisruptionBudgets().Informer(),
		f.Core().V1().PersistentVolumeClaims().Informer(),
		f.Core().V1().PersistentVolumes().Informer(),
		f.Storage().V1().VolumeAttachments().Informer(),
	}
}

func hasIndex(informer cache.SharedIndexInformer, name string) bool {
	_, ok := informer.GetIndexer().GetIndexers()[name]
	return ok
}
