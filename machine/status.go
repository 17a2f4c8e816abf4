package machine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// writeMachine persists the difference between cur (as read) and desired:
// first labels, annotations, finalizers and spec.providerID, then the
// status, each as a JSON merge patch that carries cur's resourceVersion, so
// a concurrent change makes it fail with a conflict instead of being
// overwritten. Nothing is written for parts that did not change. It
// returns the machine as last written (cur if nothing was).
func (c *Controller) writeMachine(ctx context.Context, cur, desired *v1alpha1.Machine) (*v1alpha1.Machine, error) {
	client := c.control.MachineV1alpha1().Machines(cur.Namespace)
	if patch, err := machineMetaPatch(cur, desired); err != nil {
		return cur, err
	} else if patch != nil {
		updated, err := client.Patch(ctx, cur.Name, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: c.opts.FieldManager})
		if err != nil {
			return cur, fmt.Errorf("patching machine %s/%s: %w", cur.Namespace, cur.Name, err)
		}
		c.writes.wrote(keyOf(cur), updated.ResourceVersion)
		// The status is unchanged by the patch; compare against cur's.
		status := cur.Status
		cur = updated
		cur.Status = status
	}
	patch, err := machineStatusPatch(cur, desired)
	if err != nil || patch == nil {
		return cur, err
	}
	updated, err := client.Patch(ctx, cur.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: c.opts.FieldManager}, "status")
	if err != nil {
		return cur, fmt.Errorf("patching status of machine %s/%s: %w", cur.Namespace, cur.Name, err)
	}
	c.writes.wrote(keyOf(cur), updated.ResourceVersion)
	return updated, nil
}

// machineMetaPatch returns the merge patch from cur to desired for the
// fields the controller owns outside the status, or nil if they are equal.
func machineMetaPatch(cur, desired *v1alpha1.Machine) ([]byte, error) {
	pick := func(m *v1alpha1.Machine) map[string]any {
		return map[string]any{
			"metadata": map[string]any{
				"labels":      toJSONValue(m.Labels),
				"annotations": toJSONValue(m.Annotations),
				"finalizers":  toJSONValue(m.Finalizers),
			},
			"spec": map[string]any{"providerID": m.Spec.ProviderID},
		}
	}
	return guardedPatch(pick(cur), pick(desired), cur.ResourceVersion)
}

// machineStatusPatch returns the merge patch from cur's status to
// desired's, or nil if they are equal: the status is written only when it
// changed.
func machineStatusPatch(cur, desired *v1alpha1.Machine) ([]byte, error) {
	pick := func(m *v1alpha1.Machine) map[string]any {
		return map[string]any{"status": toJSONValue(m.Status)}
	}
	return guardedPatch(pick(cur), pick(desired), cur.ResourceVersion)
}

// guardedPatch diffs old and new and adds the resourceVersion precondition.
func guardedPatch(old, new map[string]any, resourceVersion string) ([]byte, error) {
	patch := mergePatch(old, new)
	if len(patch) == 0 {
		return nil, nil
	}
	if resourceVersion != "" {
		meta, _ := patch["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			patch["metadata"] = meta
		}
		meta["resourceVersion"] = resourceVersion
	}
	return json.Marshal(patch)
}

// toJSONValue converts v to its generic JSON form (maps, slices, strings,
// float64s), as it is sent over the wire; nil for empty values.
func toJSONValue(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("machine: marshalling %T: %v", v, err)) // API types always marshal
	}
	var out any
	_ = json.Unmarshal(raw, &out)
	switch o := out.(type) {
	case map[string]any:
		if len(o) == 0 {
			return nil
		}
	case []any:
		if len(o) == 0 {
			return nil
		}
	}
	return out
}

// mergePatch returns the JSON merge patch (RFC 7386) that turns old into
// new. Both are generic JSON objects; nil members count as absent.
func mergePatch(old, new map[string]any) map[string]any {
	patch := map[string]any{}
	for k, nv := range new {
		ov := old[k]
		if nv == nil {
			if ov != nil {
				patch[k] = nil
			}
			continue
		}
		nm, nIsMap := nv.(map[string]any)
		om, oIsMap := ov.(map[string]any)
		if nIsMap && oIsMap {
			if sub := mergePatch(om, nm); len(sub) > 0 {
				patch[k] = sub
			}
			continue
		}
		if nIsMap {
			// Replace a non-object (or absent) value: strip nils first.
			if sub := mergePatch(map[string]any{}, nm); len(sub) > 0 {
				patch[k] = sub
			}
			continue
		}
		if !reflect.DeepEqual(ov, nv) {
			patch[k] = nv
		}
	}
	for k, ov := range old {
		if _, ok := new[k]; !ok && ov != nil {
			patch[k] = nil
		}
	}
	return patch
}

// pendingWrites remembers, per machine key, the resourceVersion of the
// controller's last write until the informer cache has caught up with it,
// so that a sync never acts on a cache older than its own writes (which
// could, for example, create a VM a second time after the provider ID was
// stored). Entries expire after ttl, in case an event is never seen.
type pendingWrites struct {
	mu      sync.Mutex
	ttl     time.Duration
	now     func() time.Time
	pending map[string]pendingWrite
}

type pendingWrite struct {
	rv uint64
	at time.Time
}

func (p *pendingWrites) wrote(key, resourceVersion string) {
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return // not comparable: nothing to wait for
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending == nil {
		p.pending = map[string]pendingWrite{}
	}
	p.pending[key] = pendingWrite{rv: rv, at: p.now()}
}

// observed reports whether a cached object with resourceVersion reflects
// the last write for key.
func (p *pendingWrites) observed(key, resourceVersion string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.pending[key]
	if !ok {
		return true
	}
	rv, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil || rv >= w.rv || p.now().Sub(w.at) > p.ttl {
		delete(p.pending, key)
		return true
	}
	return false
}

func (p *pendingWrites) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pending, key)
}
