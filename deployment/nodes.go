package deployment

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/internal/nodebinding"
)

// During a RollingUpdate the controller marks nodes in two ways, as MCM does:
//
//   - the nodes of old sets get the taint
//     deployment.machine.sapcloud.io/prefer-no-schedule=True:PreferNoSchedule,
//     so that pods rescheduled during the rollout prefer the new nodes over
//     nodes that are about to go;
//   - unless the controller option turns it off, every node of the
//     deployment gets cluster-autoscaler.kubernetes.io/scale-down-disabled
//     "true" and the marker scale-down-disabled-by-mcm "true", so that the
//     cluster-autoscaler does not remove nodes while the rollout moves pods
//     around, and later knows whose annotation it was.
//
// When the rollout is complete the annotations go again, but only from nodes
// carrying the marker, and the new set's nodes lose the taint: after a
// rollback the new set is a former old set whose nodes were tainted
// (MCM #989).
//
// The marks are written from a queue of their own (ReconcileNodes), fed by
// every sync of a deployment and by every change of a node's marks, not
// by the deployment's sync: a rollout's first step marks every node of the
// old sets, and a sync that wrote a thousand nodes held up the next
// scaling step of the rollout by seconds.

// preferNoScheduleValue is the value of the rollout taint.
const preferNoScheduleValue = "True"

// scaleDownDisabledValue is the value of the scale-down-disabled annotation
// and of its by-mcm marker; the cluster-autoscaler only honours "true".
const scaleDownDisabledValue = "true"

// rolloutTaint is the taint the nodes of old sets carry during a rollout.
func rolloutTaint() corev1.Taint {
	return corev1.Taint{Key: v1alpha1.PreferNoScheduleTaintKey, Value: preferNoScheduleValue, Effect: corev1.TaintEffectPreferNoSchedule}
}

// nodeChange is what to write on one node; the zero value changes nothing.
type nodeChange struct {
	Node string
	// Taint: +1 add the PreferNoSchedule taint, -1 remove it, 0 leave it.
	Taint int
	// ScaleDown: +1 add scale-down-disabled and its by-mcm marker, -1 remove
	// both (only where the marker is), 0 leave them.
	ScaleDown int
}

// nodesOf returns the nodes backing machines, found by the machine label
// node (v1alpha1.NodeLabelKey), sorted by name. Machines without the label
// (their node has not joined yet, or there is no target cluster),
// machines whose node is not in nodes, and machines the node is not bound
// to (nodebinding.Bound) are skipped; a node named by two machines is
// listed once.
func nodesOf(machines []*v1alpha1.Machine, nodes map[string]*corev1.Node) []*corev1.Node {
	var out []*corev1.Node
	seen := map[string]bool{}
	for _, m := range machines {
		if m == nil {
			continue
		}
		name := m.Labels[v1alpha1.NodeLabelKey]
		n := nodes[name]
		if name == "" || n == nil || seen[n.Name] || !nodebinding.Bound(n, m) {
			// A node label and a provider ID are anyone's to write who
			// may create a machine: only the node the machine controller
			// bound to the machine is marked on its behalf. A node bound
			// to no machine yet (nodebinding.Confirms would take it) is
			// marked once its machine is bound: the binding's change
			// queues the marks again. A node never bound is never
			// marked, so no forged claim leaves marks that nothing
			// would take off after the rollout.
			continue
		}
		seen[n.Name] = true
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// planNodeMarks: rolling tells whether a rollout is under way (old sets
// still have machines); complete whether the rollout finished;
// annotateScaleDown is the controller option (default true). newNodes and
// oldNodes are the nodes of the new set's and of old sets' machines. Returns
// only nodes that need a write, sorted by node name. Nodes without a change
// are not listed (every API write must earn its place).
//
// The rules, for each node:
//
//   - taint: while rolling, an old set's node gets the taint; once complete,
//     a new set's node loses it. Nothing else touches it: an old node is
//     deleted with its machine, and a new node mid-rollout keeps what it has
//     until the rollout completes.
//   - scale-down: while rolling with the option on, every node gets the
//     annotation and its marker; once complete (and not rolling with the
//     option on, which wins so that nodes stay protected while old machines
//     remain), nodes with the marker lose both, whatever the option says now,
//     so that turning the option off still cleans up after earlier rollouts.
//
// A node already in the wanted state gets no change for that part; so does
// a node whose scale-down-disabled "true" is somebody else's (no marker). That
// annotation is neither claimed nor removed at completion, because claiming
// it would make the controller delete a person's protection when the
// rollout ends, the very thing the marker exists to prevent. A node in both
// lists counts as an old node for the taint while rolling.
func planNodeMarks(rolling, complete, annotateScaleDown bool, newNodes, oldNodes []*corev1.Node) []nodeChange {
	type role struct {
		node     *corev1.Node
		new, old bool
	}
	roles := map[string]*role{}
	note := func(nodes []*corev1.Node, old bool) {
		for _, n := range nodes {
			if n == nil {
				continue
			}
			r := roles[n.Name]
			if r == nil {
				r = &role{node: n}
				roles[n.Name] = r
			}
			if old {
				r.old = true
			} else {
				r.new = true
			}
		}
	}
	note(newNodes, false)
	note(oldNodes, true)

	var changes []nodeChange
	for name, r := range roles {
		ch := nodeChange{Node: name}
		switch {
		case rolling && r.old:
			ch.Taint = 1
		case complete && r.new:
			ch.Taint = -1
		}
		switch {
		case rolling && annotateScaleDown:
			ch.ScaleDown = 1
		case complete:
			ch.ScaleDown = -1
		}
		if _, changed := taintsAfter(r.node.Spec.Taints, ch.Taint); !changed {
			ch.Taint = 0
		}
		if len(scaleDownPatch(r.node.Annotations, ch.ScaleDown)) == 0 {
			ch.ScaleDown = 0
		}
		if ch.Taint != 0 || ch.ScaleDown != 0 {
			changes = append(changes, ch)
		}
	}
	slices.SortFunc(changes, func(a, b nodeChange) int { return strings.Compare(a.Node, b.Node) })
	return changes
}

// taintsAfter returns the node's taints after op and whether they differ
// from taints. Only taints with the rollout taint's key are managed: +1
// leaves exactly one of them, True:PreferNoSchedule, in the place of the
// first one there was (a taint with the key but another value or effect is
// rewritten, since the key is the controller's), or at the end; -1 removes
// every taint with the key. Other taints stay as they are, in their order.
// taints is not modified.
func taintsAfter(taints []corev1.Taint, op int) ([]corev1.Taint, bool) {
	want := rolloutTaint()
	var out []corev1.Taint
	placed := false
	for _, t := range taints {
		if t.Key != want.Key {
			out = append(out, t)
			continue
		}
		if op > 0 && !placed {
			out = append(out, want)
			placed = true
		}
		if op == 0 {
			out = append(out, t)
		}
	}
	if op > 0 && !placed {
		out = append(out, want)
	}
	return out, !slices.EqualFunc(taints, out, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value })
}

// scaleDownPatch returns the annotation changes op makes, as a merge patch
// of metadata.annotations (a nil value deletes the key); empty when there
// are none. +1 sets the annotation and its marker unless the annotation is
// already "true": with the marker the node is done, and without it the
// annotation is somebody else's, which the controller neither claims nor
// removes later. -1 deletes both only where the marker is "true".
func scaleDownPatch(annotations map[string]string, op int) map[string]*string {
	patch := map[string]*string{}
	switch {
	case op > 0 && annotations[v1alpha1.ScaleDownDisabledAnnotation] != scaleDownDisabledValue:
		v := scaleDownDisabledValue
		patch[v1alpha1.ScaleDownDisabledAnnotation] = &v
		patch[v1alpha1.ScaleDownDisabledByMCMAnnotation] = &v
	case op < 0 && annotations[v1alpha1.ScaleDownDisabledByMCMAnnotation] == scaleDownDisabledValue:
		patch[v1alpha1.ScaleDownDisabledByMCMAnnotation] = nil
		if _, ok := annotations[v1alpha1.ScaleDownDisabledAnnotation]; ok {
			patch[v1alpha1.ScaleDownDisabledAnnotation] = nil
		}
	}
	return patch
}

// errNoResourceVersion is returned for a taint change on a node without a
// resourceVersion, whose taints could not be written safely.
var errNoResourceVersion = errors.New("node has no resourceVersion to guard its taints with")

// nodeMarkPatch returns the patch body that applies ch to node n; nil when
// nothing changes.
//
// The body is a JSON merge patch (RFC 7386, types.MergePatchType). Node
// spec.taints is an atomic list, so a strategic merge patch would replace it
// whole as well and gain nothing, while a merge patch needs no schema and
// means the same to every client. Annotations merge key by key: a string
// sets one, null deletes one, and other keys are left alone, so an
// annotation-only patch carries no guard and cannot conflict. A taint change
// sends the full resulting list from n and metadata.resourceVersion: taints
// written concurrently (the node lifecycle controller's NoExecute taints,
// for one) would otherwise be dropped, and with the guard the API server
// answers 409 Conflict instead and the controller retries with a fresh
// node. A taint change on a node without a resourceVersion is an error for
// that reason. The rules of planNodeMarks apply to n as it is now, so a
// stale change for an updated node comes out nil or smaller, never wrong.
func nodeMarkPatch(n *corev1.Node, ch nodeChange) ([]byte, error) {
	if n == nil {
		return nil, nil
	}
	metadata := map[string]any{}
	body := map[string]any{}
	if annotations := scaleDownPatch(n.Annotations, ch.ScaleDown); len(annotations) > 0 {
		metadata["annotations"] = annotations
	}
	if taints, changed := taintsAfter(n.Spec.Taints, ch.Taint); changed {
		if n.ResourceVersion == "" {
			return nil, errNoResourceVersion
		}
		metadata["resourceVersion"] = n.ResourceVersion
		if len(taints) == 0 {
			body["spec"] = map[string]any{"taints": nil}
		} else {
			body["spec"] = map[string]any{"taints": taints}
		}
	}
	if len(metadata) == 0 {
		return nil, nil
	}
	body["metadata"] = metadata
	return json.Marshal(body)
}
