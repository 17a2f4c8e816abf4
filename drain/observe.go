package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// getNode reads the node, from the lister if there is one.
func (d *Drainer) getNode(ctx context.Context, name string) (*corev1.Node, error) {
	var (
		node *corev1.Node
		err  error
	)
	if l := d.opts.Listers.Nodes; l != nil {
		node, err = l.Get(name)
	} else {
		node, err = d.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("node %q: %w", name, ErrNodeNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("getting node %q: %w", name, err)
	}
	return node, nil
}

// observe reads everything the planner needs besides the node. Objects
// from listers are shared with the informer cache and must not be changed;
// nothing here or in the planner does.
func (d *Drainer) observe(ctx context.Context, node *corev1.Node, state State) (Snapshot, error) {
	snap := Snapshot{Node: node, State: state}
	pods, err := d.listPods(ctx, node.Name)
	if err != nil {
		return snap, err
	}
	snap.Pods = pods

	namespaces := make([]string, 0)
	for _, pod := range pods {
		namespaces = append(namespaces, pod.Namespace)
	}
	slices.Sort(namespaces)
	namespaces = slices.Compact(namespaces)
	if snap.PDBs, err = d.listPDBs(ctx, namespaces); err != nil {
		return snap, err
	}

	now := d.opts.Clock.Now()
	if d.needVolumes(node, pods, state, now) {
		if snap.Claims, err = d.resolveClaims(ctx, pods); err != nil {
			return snap, err
		}
		if snap.VolumeAttachments, err = d.listVolumeAttachments(ctx); err != nil {
			return snap, err
		}
		if snap.VolumeIDs, err = d.volumeIDs(ctx, node.Name, snap.Claims, snap.VolumeAttachments, state.Tracked); err != nil {
			return snap, err
		}
	}
	snap.Now = d.opts.Clock.Now()
	return snap, nil
}

// needVolumes reports whether the planner will look at volumes: when waits
// are on, the fast path is off, and some pod uses a claim, some tracked pod
// had volumes, or no pod is left to drain (the final sweep).
func (d *Drainer) needVolumes(node *corev1.Node, pods []*corev1.Pod, state State, now time.Time) bool {
	if d.opts.Volumes.Skip {
		return false
	}
	if since := notReadySince(node); d.opts.Unreachable.After >= 0 && !since.IsZero() &&
		now.Sub(since) >= d.opts.Unreachable.After {
		return false
	}
	for _, t := range state.Tracked {
		if len(t.Volumes) > 0 {
			return true
		}
	}
	drainLeft := false
	for _, pod := range pods {
		if len(claimNames(pod)) > 0 {
			return true
		}
		if !drainLeft {
			pol, _, _, _ := podPolicy(pod, d.opts)
			drainLeft = pol != PolicySkip
		}
	}
	return !drainLeft
}

// listPods lists the pods bound to the node: from the pod indexer, or with
// a paginated LIST using the field selector spec.nodeName.
func (d *Drainer) listPods(ctx context.Context, nodeName string) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	if idx := d.opts.Listers.Pods; idx != nil {
		var objs []any
		if _, ok := idx.GetIndexers()[NodeNameIndex]; ok {
			var err error
			if objs, err = idx.ByIndex(NodeNameIndex, nodeName); err != nil {
				return nil, fmt.Errorf("listing pods of node %q from the cache: %w", nodeName, err)
			}
		} else {
			objs = idx.List()
		}
		for _, obj := range objs {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName == nodeName {
				pods = append(pods, pod)
			}
		}
		return pods, nil
	}
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String()}
	pages, err := paginate(ctx, opts, d.opts.PageSize, d.client.CoreV1().Pods(metav1.NamespaceAll).List)
	if err != nil {
		return nil, fmt.Errorf("listing pods of node %q: %w", nodeName, err)
	}
	for _, page := range pages {
		for i := range page.Items {
			// The field selector already did this; a fake client does not.
			if page.Items[i].Spec.NodeName == nodeName {
				pods = append(pods, &page.Items[i])
			}
		}
	}
	return pods, nil
}

func (d *Drainer) listPDBs(ctx context.Context, namespaces []string) ([]*policyv1.PodDisruptionBudget, error) {
	var out []*policyv1.PodDisruptionBudget
	for _, ns := range namespaces {
		if l := d.opts.Listers.PodDisruptionBudgets; l != nil {
			pdbs, err := l.PodDisruptionBudgets(ns).List(labels.Everything())
			if err != nil {
				return nil, fmt.Errorf("listing PodDisruptionBudgets in %q from the cache: %w", ns, err)
			}
			out = append(out, pdbs...)
			continue
		}
		pages, err := paginate(ctx, metav1.ListOptions{}, d.opts.PageSize, d.client.PolicyV1().PodDisruptionBudgets(ns).List)
		if err != nil {
			return nil, fmt.Errorf("listing PodDisruptionBudgets in %q: %w", ns, err)
		}
		for _, page := range pages {
			for i := range page.Items {
				out = append(out, &page.Items[i])
			}
		}
	}
	return out, nil
}

// resolveClaims maps the pods' claims to their bound volumes. Claims that
// do not exist or are not bound are left out.
func (d *Drainer) resolveClaims(ctx context.Context, pods []*corev1.Pod) (map[string]string, error) {
	claims := map[string]string{}
	for _, pod := range pods {
		for _, key := range claimNames(pod) {
			if _, done := claims[key]; done {
				continue
			}
			ns, name, _ := strings.Cut(key, "/")
			var (
				pvc *corev1.PersistentVolumeClaim
				err error
			)
			if l := d.opts.Listers.PersistentVolumeClaims; l != nil {
				pvc, err = l.PersistentVolumeClaims(ns).Get(name)
			} else {
				pvc, err = d.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			}
			switch {
			case apierrors.IsNotFound(err):
				claims[key] = ""
			case err != nil:
				return nil, fmt.Errorf("getting PersistentVolumeClaim %s: %w", key, err)
			default:
				claims[key] = pvc.Spec.VolumeName
			}
		}
	}
	return claims, nil
}

// listVolumeAttachments lists all VolumeAttachments. A cluster that does
// not serve them has none.
func (d *Drainer) listVolumeAttachments(ctx context.Context) ([]*storagev1.VolumeAttachment, error) {
	if l := d.opts.Listers.VolumeAttachments; l != nil {
		vas, err := l.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("listing VolumeAttachments from the cache: %w", err)
		}
		return vas, nil
	}
	pages, err := paginate(ctx, metav1.ListOptions{}, d.opts.PageSize, d.client.StorageV1().VolumeAttachments().List)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing VolumeAttachments: %w", err)
	}
	var out []*storagev1.VolumeAttachment
	for _, page := range pages {
		for i := range page.Items {
			out = append(out, &page.Items[i])
		}
	}
	return out, nil
}

// volumeIDs asks Options.Volumes.IDs for the volume IDs of the pods'
// volumes, of the tracked ones and of the volumes attached to the node. It returns nil (no
// narrowing) without a getter or when the getter cannot tell.
func (d *Drainer) volumeIDs(ctx context.Context, nodeName string, claims map[string]string,
	vas []*storagev1.VolumeAttachment, tracked []Tracked) (map[string][]string, error) {
	getter := d.opts.Volumes.IDs
	if getter == nil {
		return nil, nil
	}
	var names []string
	for _, pv := range claims {
		if pv != "" {
			names = append(names, pv)
		}
	}
	for _, va := range vas {
		if va.Spec.NodeName == nodeName && va.Spec.Source.PersistentVolumeName != nil {
			names = append(names, *va.Spec.Source.PersistentVolumeName)
		}
	}
	for _, t := range tracked {
		names = append(names, t.Volumes...)
	}
	slices.Sort(names)
	names = slices.Compact(names)

	ids := make(map[string][]string, len(names))
	for _, name := range names {
		var (
			pv  *corev1.PersistentVolume
			err error
		)
		if l := d.opts.Listers.PersistentVolumes; l != nil {
			pv, err = l.Get(name)
		} else {
			pv, err = d.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		}
		if apierrors.IsNotFound(err) {
			continue // no volume, nothing to detach
		}
		if err != nil {
			return nil, fmt.Errorf("getting PersistentVolume %q: %w", name, err)
		}
		// The getter is someone else's code: hand it a copy, never the
		// informer's object.
		got, err := getter.GetVolumeIDs(ctx, []*corev1.PersistentVolumeSpec{pv.Spec.DeepCopy()})
		if errors.Is(err, errors.ErrUnsupported) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("getting the volume IDs of PersistentVolume %q: %w", name, err)
		}
		for _, id := range got {
			if id != "" {
				ids[name] = append(ids[name], id)
			}
		}
	}
	return ids, nil
}

// paginate runs a LIST in pages of pageSize. If the continue token expires
// midway, it starts over once, from a fresh list.
func paginate[L metav1.ListInterface](ctx context.Context, opts metav1.ListOptions, pageSize int64,
	list func(context.Context, metav1.ListOptions) (L, error)) ([]L, error) {
	opts.Limit = pageSize
	var pages []L
	restarted := false
	for {
		page, err := list(ctx, opts)
		if err != nil {
			if apierrors.IsResourceExpired(err) && opts.Continue != "" && !restarted {
				restarted = true
				opts.Continue = ""
				pages = nil
				continue
			}
			return nil, err
		}
		pages = append(pages, page)
		opts.Continue = page.GetContinue()
		if opts.Continue == "" {
			return pages, nil
		}
	}
}
