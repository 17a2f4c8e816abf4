// Package patch builds and sends the JSON merge patches (RFC 7386) with
// which every controller of this module writes the fields it owns: a diff
// of those fields only, guarded by the resourceVersion the diff was
// computed from, and nothing at all when nothing changed. Fields other
// writers own are never sent, so they are never overwritten, and a
// concurrent change makes the write fail with a conflict instead of being
// lost. A writer that is the only one of the fields it sends, and waits
// until its cache shows its own last write before it diffs again, may
// leave the guard out (an empty resourceVersion), so that writes of other
// fields of the same object (a MachineSet's status beside its spec) do
// not make it fail. Built-in objects whose lists the API server merges
// item by item (a node's finalizers and conditions) also take strategic
// merge patches (SendStrategic), which add or remove one item without a
// guard.
//
// # Owned fields
//
// A writer names what it owns once, as a function from the object to
// Fields, and Diff applies that one function to both the object as read
// and the object as wanted. There is no way to diff two Fields built
// separately: a whole map on one side against a map holding only the keys
// one means to write on the other turns every other key into null, and
// deletes what other writers own (a MachineDeployment's
// kubectl.kubernetes.io/last-applied-configuration, the autoscaler's
// options). A writer that owns a few keys of a map, not the whole map,
// says which with Keys; a writer that puts the whole map in its Fields
// owns every key of it, and builds the wanted object from the one it read.
//
// # Usage
//
//	// The controller owns one annotation of the deployment; the others are
//	// kubectl's, the autoscaler's, anyone's.
//	owned := func(a map[string]string) patch.Fields {
//		return patch.Fields{"metadata": patch.Fields{"annotations": patch.Keys(a, "example.com/mark")}}
//	}
//	want := maps.Clone(cached.Annotations)
//	want["example.com/mark"] = "done"
//	data, err := patch.Diff(owned, cached.Annotations, want, cached.ResourceVersion)
//	if err != nil || data == nil {
//		return err // nil data: nothing changed, nothing is written
//	}
//	_, err = patch.Send(ctx, client.MachineDeployments(ns).Patch, cached.Name, data, fieldManager)
//
// Two writes every controller makes to the objects it owns have one
// implementation each: its finalizer, and its status.
//
//	d, err = patch.SetFinalizer(ctx, client.MachineDeployments(ns).Patch, d, finalizer, true, fieldManager)
//	conditions := func(st v1alpha1.MachineDeploymentStatus) any { return st.Conditions }
//	d, err = patch.WriteStatus(ctx, client.MachineDeployments(ns).Patch, d, d.Status, computed, conditions, fieldManager)
package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Fields describes the owned fields of an object as nested JSON objects.
// A nested Fields groups members; any other value is a leaf, marshalled to
// JSON as it goes over the wire. An empty leaf (nil, "", an empty map or
// list) counts as absent. As in every merge patch, JSON objects are diffed
// member by member (a label that is gone becomes null) and lists are
// replaced whole.
type Fields map[string]any

// Func is the Patch method of a typed client, e.g.
// client.CoreV1().Nodes().Patch.
type Func[T any] func(ctx context.Context, name string, pt types.PatchType, data []byte,
	opts metav1.PatchOptions, subresources ...string) (T, error)

// Diff returns the merge patch that turns owned(old) into owned(new), with
// metadata.resourceVersion set to resourceVersion (when not empty) so that
// the API server rejects it with a conflict if the object changed since it
// was read. It returns nil when both project to equal fields: nothing to
// write. owned names the fields the writer owns (see the package
// documentation); old is what was read, new what is wanted.
func Diff[T any](owned func(T) Fields, old, new T, resourceVersion string) ([]byte, error) {
	return diffFields(owned(old), owned(new), resourceVersion)
}

// Keys is the part of the string map m (labels, annotations) that a writer
// owns: the named keys only, each with its value in m or absent. As a
// member of Fields in place of the whole map, it makes Diff write those
// keys, remove them (null) where the wanted map lacks them, and leave every
// other key of the map out of the patch. An empty value is a value here,
// not an absent key.
func Keys(m map[string]string, keys ...string) Fields {
	f := make(Fields, len(keys))
	for _, k := range keys {
		if v, ok := m[k]; ok {
			f[k] = keyValue(v)
		} else {
			f[k] = nil
		}
	}
	return f
}

// keyValue is a present key of Keys: unlike other leaves, "" is a value.
type keyValue string

// diffFields is Diff on the owned fields themselves.
func diffFields(old, new Fields, resourceVersion string) ([]byte, error) {
	// Most syncs change nothing. Equal values have equal JSON forms, and
	// comparing them costs a fraction of building those (BenchmarkSyncPatches
	// in package machine).
	if reflect.DeepEqual(old, new) {
		return nil, nil
	}
	o, err := normalize(old)
	if err != nil {
		return nil, err
	}
	n, err := normalize(new)
	if err != nil {
		return nil, err
	}
	p := mergePatch(o, n)
	if len(p) == 0 {
		return nil, nil
	}
	if resourceVersion != "" {
		meta, _ := p["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			p["metadata"] = meta
		}
		meta["resourceVersion"] = resourceVersion
	}
	return json.Marshal(p)
}

// Finalizer returns the patch that adds (want) or removes finalizer from
// an object whose finalizers are have, guarded by resourceVersion, or nil
// when the object is already as wanted. The other finalizers keep their
// order.
func Finalizer(have []string, finalizer string, want bool, resourceVersion string) ([]byte, error) {
	if slices.Contains(have, finalizer) == want {
		return nil, nil
	}
	out := slices.DeleteFunc(slices.Clone(have), func(f string) bool { return f == finalizer })
	if want {
		out = append(out, finalizer)
	}
	// A merge patch replaces lists whole, so the full list is sent; the
	// resourceVersion makes sure it is the list the server still has.
	return Diff(finalizerFields, have, out, resourceVersion)
}

func finalizerFields(f []string) Fields { return Fields{"metadata": Fields{"finalizers": f}} }

// Send sends data as a merge patch through fn, naming fieldManager in the
// managed fields. It exists so that every write of the module goes out the
// same way; callers wrap its error with what they were doing.
func Send[T any](ctx context.Context, fn Func[T], name string, data []byte, fieldManager string, subresources ...string) (T, error) {
	return fn(ctx, name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: fieldManager}, subresources...)
}

// SendStrategic sends data as a strategic merge patch through fn, as Send
// does a merge patch. A strategic merge patch of a built-in object merges
// the lists the API server merges by key (a node's finalizers, conditions
// and taints' items) item by item: a patch that adds or removes one item
// needs no guard, as it cannot undo anyone's concurrent change to the
// others. Custom resources do not take it.
func SendStrategic[T any](ctx context.Context, fn Func[T], name string, data []byte, fieldManager string, subresources ...string) (T, error) {
	return fn(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{FieldManager: fieldManager}, subresources...)
}

// RemoveFinalizerStrategic returns the strategic merge patch that removes
// finalizer from a built-in object and changes nothing else: it needs no
// guard, and succeeds whatever else changed (SendStrategic).
func RemoveFinalizerStrategic(finalizer string) []byte {
	name, _ := json.Marshal(finalizer) // a string always encodes
	return fmt.Appendf(nil, `{"metadata":{"$deleteFromPrimitiveList/finalizers":[%s]}}`, name)
}

// normalize turns f into generic JSON (maps, slices, strings, float64s,
// bools), leaf by leaf, with empty leaves as nil.
func normalize(f Fields) (map[string]any, error) {
	out := make(map[string]any, len(f))
	for k, v := range f {
		if kv, ok := v.(keyValue); ok {
			out[k] = string(kv)
			continue
		}
		if sub, ok := v.(Fields); ok {
			n, err := normalize(sub)
			if err != nil {
				return nil, err
			}
			out[k] = n
			continue
		}
		leaf, err := jsonValue(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		out[k] = leaf
	}
	return out, nil
}

// jsonValue converts v to its generic JSON form, as it goes over the wire;
// nil for empty values.
func jsonValue(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	switch o := out.(type) {
	case map[string]any:
		if len(o) == 0 {
			return nil, nil
		}
	case []any:
		if len(o) == 0 {
			return nil, nil
		}
	case string:
		if o == "" {
			return nil, nil
		}
	}
	return out, nil
}

// mergePatch returns the merge patch that turns old into new. Both are
// generic JSON objects; nil members count as absent.
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
			// Replacing a non-object (or absent) value: leave out the nils,
			// which would only delete what is not there.
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
