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

	need := d.volumeNeeds(node, pods, state, d.opts.Clock.Now())
	if need.claims {
		if snap.Claims, err = d.resolveClaims(ctx, pods); err != nil {
			return snap, err
		}
	}
	if need.attachments(snap.Claims) {
		if snap.VolumeAttachments, err = d.listVolumeAttachments(ctx, node.Name, need.elsewhere); err != nil {
			return snap, err
		}
		if need.waits {
			if snap.VolumeIDs, err = d.volumeIDs(ctx, node.Name, snap.Claims, snap.VolumeAttachments, state.tracked); err != nil {
				return snap, err
			}
		}
	}
	snap.Now = d.opts.Clock.Now()
	return snap, nil
}

// volumeNeeds says which volume objects a pass reads, by the planner's own
// rules, so that nothing is fetched that the plan would not look at.
type volumeNeeds struct {
	// waits: volume waits apply (not skipped, node not unreachable).
	waits bool
	// detach: the attachments of an unreachable node may be waited for
	// or deleted (see VolumeOptions).
	detach bool
	// claims: some pod uses a claim and waits apply.
	claims bool
	// tracked: a tracked pod had volumes.
	tracked bool
	// drainLeft: some pod is left to drain.
	drainLeft bool
	// elsewhere are the volumes whose attachments to other nodes the
	// re-attach waits look at.
	elsewhere map[string]bool
}

func (d *Drainer) volumeNeeds(node *corev1.Node, pods []*corev1.Pod, state State, now time.Time) volumeNeeds {
	opts := d.opts
	var n volumeNeeds
	if opts.Volumes.Skip {
		return n
	}
	notReady := notReadySince(node)
	fast := unreachable(notReady, now, opts.Unreachable)
	for _, pod := range pods {
		if pol, _, _, _ := effectivePolicy(pod, opts, now, fast); pol != PolicySkip {
			n.drainLeft = true
		}
		if len(claimNames(pod)) > 0 {
			n.claims = true
		}
	}
	n.waits = !fast
	n.claims = n.claims && n.waits
	for _, t := range state.tracked {
		if len(t.Volumes) == 0 {
			continue
		}
		n.tracked = true
		if n.waits && opts.Volumes.WaitForReattach {
			if n.elsewhere == nil {
				n.elsewhere = map[string]bool{}
			}
			for _, pv := range t.Volumes {
				n.elsewhere[pv] = true
			}
		}
	}
	if !opts.Volumes.KeepAttachments && !n.drainLeft {
		f := forcingOf(drainDeadline(state, opts, now), notReady, opts.Unreachable)
		n.detach = (fast && !f.deadline.IsZero()) || (f.byNode && f.forced(now))
	}
	return n
}

// attachments reports whether the plan looks at VolumeAttachments: those
// of the node once no pod is left (the final sweep, or an unreachable
// node's), and those of the volumes of tracked pods or of pods whose
// claims are bound.
func (n volumeNeeds) attachments(claims map[string]string) bool {
	if n.detach {
		return true
	}
	if !n.waits {
		return false
	}
	if n.tracked || !n.drainLeft {
		return true
	}
	for _, pv := range claims {
		if pv != "" {
			return true
		}
	}
	return false
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

// listVolumeAttachments returns the VolumeAttachments of the node and
// those of other nodes that attach the volumes in elsewhere: from the
// indexer (by VolumeAttachmentNodeIndex, else by a scan of the cache), or
// from one LIST of all attachments, as the API has no field selector for
// their node. A cluster that does not serve them has none.
func (d *Drainer) listVolumeAttachments(ctx context.Context, nodeName string, elsewhere map[string]bool) ([]*storagev1.VolumeAttachment, error) {
	var out []*storagev1.VolumeAttachment
	keep := func(va *storagev1.VolumeAttachment) {
		pv := va.Spec.Source.PersistentVolumeName
		if va.Spec.NodeName == nodeName || (pv != nil && elsewhere[*pv]) {
			out = append(out, va)
		}
	}
	if idx := d.opts.Listers.VolumeAttachments; idx != nil {
		var objs []any
		if _, ok := idx.GetIndexers()[VolumeAttachmentNodeIndex]; ok && len(elsewhere) == 0 {
			var err error
			if objs, err = idx.ByIndex(VolumeAttachmentNodeIndex, nodeName); err != nil {
				return nil, fmt.Errorf("listing VolumeAttachments of node %q from the cache: %w", nodeName, err)
			}
		} else {
			objs = idx.List()
		}
		for _, obj := range objs {
			if va, ok := obj.(*storagev1.VolumeAttachment); ok {
				keep(va)
			}
		}
		return out, nil
	}
	pages, err := paginate(ctx, metav1.ListOptions{}, d.opts.PageSize, d.client.StorageV1().VolumeAttachments().List)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing VolumeAttachments: %w", err)
	}
	for _, page := range pages {
		for i := range page.Items {
			keep(&page.Items[i])
		}
	}
	return out, nil
}

// volumeIDs asks Options.Volumes.IDs for the volume IDs of the pods'
// volumes, of the tracked ones and of the volumes attached to the node. It returns nil (no
// narrowing) without a getter or when the getter cannot tell.
func (d *Drainer) volumeIDs(ctx context.Context, nodeName string, claims map[string]string,
	vas []*storagev1.VolumeAttachment, tracked []trackedPod) (map[string][]string, error) {
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
