package patch

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"pgregory.net/rapid"
)

// TestDiffFields covers the merge-patch engine under Diff, on owned fields
// given directly.
func TestDiffFields(t *testing.T) {
	taint := corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name     string
		old, new Fields
		rv       string
		want     string // "" for no patch
	}{
		{name: "equal", old: Fields{"metadata": Fields{"labels": map[string]string{"a": "1"}}},
			new: Fields{"metadata": Fields{"labels": map[string]string{"a": "1"}}}, rv: "7"},
		{name: "empty map equals absent", old: Fields{"metadata": Fields{"labels": map[string]string{}}},
			new: Fields{"metadata": Fields{"labels": nil}}, rv: "7"},
		{name: "empty string equals absent", old: Fields{"spec": Fields{"providerID": ""}},
			new: Fields{"spec": Fields{}}},
		{name: "label added and removed", old: Fields{"metadata": Fields{"labels": map[string]string{"a": "1", "b": "2"}}},
			new:  Fields{"metadata": Fields{"labels": map[string]string{"a": "1", "c": "3"}}},
			rv:   "7",
			want: `{"metadata":{"labels":{"b":null,"c":"3"},"resourceVersion":"7"}}`},
		{name: "all labels removed", old: Fields{"metadata": Fields{"labels": map[string]string{"a": "1"}}},
			new:  Fields{"metadata": Fields{"labels": map[string]string{}}},
			want: `{"metadata":{"labels":null}}`},
		{name: "lists are replaced whole", old: Fields{"spec": Fields{"taints": []corev1.Taint{taint}}},
			new:  Fields{"spec": Fields{"taints": []corev1.Taint{taint, {Key: "x", Effect: corev1.TaintEffectNoExecute}}}},
			rv:   "3",
			want: `{"metadata":{"resourceVersion":"3"},"spec":{"taints":[{"effect":"NoSchedule","key":"k"},{"effect":"NoExecute","key":"x"}]}}`},
		{name: "scalar set", old: Fields{"spec": Fields{"providerID": ""}}, new: Fields{"spec": Fields{"providerID": "sim:///a"}},
			want: `{"spec":{"providerID":"sim:///a"}}`},
		{name: "struct leaf diffed member by member", old: Fields{"status": corev1.NodeStatus{Phase: "Running", Capacity: nil}},
			new:  Fields{"status": corev1.NodeStatus{Phase: "Terminated"}},
			rv:   "9",
			want: `{"metadata":{"resourceVersion":"9"},"status":{"phase":"Terminated"}}`},
		{name: "object replacing absent drops nils", old: Fields{},
			new:  Fields{"metadata": Fields{"labels": map[string]string{"a": "1"}, "annotations": nil}},
			want: `{"metadata":{"labels":{"a":"1"}}}`},
		{name: "member absent from new is deleted", old: Fields{"metadata": Fields{"labels": map[string]string{"a": "1"}}},
			new:  Fields{"metadata": Fields{}},
			want: `{"metadata":{"labels":null}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := diffFields(tt.old, tt.new, tt.rv)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("diffFields() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiffUnmarshallable(t *testing.T) {
	owned := func(v any) Fields { return Fields{"spec": Fields{"bad": v}} }
	if _, err := Diff(owned, any(nil), any(func() {}), ""); err == nil {
		t.Fatal("want an error for a value JSON cannot encode")
	}
}

// TestKeys: a writer that owns some keys of a map writes those and leaves
// every other key of the map out of the patch, whatever the map holds
// besides; the whole map as owned field would delete the others.
func TestKeys(t *testing.T) {
	const trigger = "node.machine.sapcloud.io/trigger-deletion-by-mcm"
	foreign := map[string]string{
		"kubectl.kubernetes.io/last-applied-configuration":           `{"kind":"MachineDeployment"}`,
		"autoscaler.gardener.cloud/scale-down-utilization-threshold": "0.6",
		"example.com/anything":                                       "",
	}
	with := func(add map[string]string) map[string]string {
		out := maps.Clone(foreign)
		maps.Copy(out, add)
		return out
	}
	owned := func(a map[string]string) Fields {
		return Fields{"metadata": Fields{"annotations": Keys(a, trigger)}}
	}
	tests := []struct {
		name      string
		old, new  map[string]string
		rv        string
		wantPatch string
	}{
		{name: "set", old: foreign, new: with(map[string]string{trigger: "m-1~2026-11-26T08:00:00Z"}), rv: "5",
			wantPatch: `{"metadata":{"annotations":{"node.machine.sapcloud.io/trigger-deletion-by-mcm":"m-1~2026-11-26T08:00:00Z"},"resourceVersion":"5"}}`},
		{name: "rewritten", old: with(map[string]string{trigger: "m-1"}), new: with(map[string]string{trigger: "m-1~2026-11-26T08:00:00Z"}),
			wantPatch: `{"metadata":{"annotations":{"node.machine.sapcloud.io/trigger-deletion-by-mcm":"m-1~2026-11-26T08:00:00Z"}}}`},
		{name: "pruned", old: with(map[string]string{trigger: "m-1"}), new: foreign,
			wantPatch: `{"metadata":{"annotations":{"node.machine.sapcloud.io/trigger-deletion-by-mcm":null}}}`},
		{name: "an empty value is a value", old: with(map[string]string{trigger: ""}), new: foreign,
			wantPatch: `{"metadata":{"annotations":{"node.machine.sapcloud.io/trigger-deletion-by-mcm":null}}}`},
		{name: "set to empty", old: foreign, new: with(map[string]string{trigger: ""}),
			wantPatch: `{"metadata":{"annotations":{"node.machine.sapcloud.io/trigger-deletion-by-mcm":""}}}`},
		{name: "others changed only", old: with(map[string]string{trigger: "m-1"}), new: map[string]string{trigger: "m-1"}},
		{name: "nil maps", old: nil, new: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Diff(owned, tt.old, tt.new, tt.rv)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantPatch, string(got)); diff != "" {
				t.Errorf("Diff() (-want +got):\n%s", diff)
			}
		})
	}
	// The same write with the whole map owned: what Keys is for.
	whole := func(a map[string]string) Fields { return Fields{"metadata": Fields{"annotations": a}} }
	got, err := Diff(whole, foreign, map[string]string{trigger: "m-1"}, "")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(got, &p); err != nil {
		t.Fatal(err)
	}
	for k := range foreign {
		if v, ok := p.Metadata.Annotations[k]; !ok || v != nil {
			t.Errorf("owning the whole map against a partial one: %s is %v in %s, want null (the reason for Keys)", k, v, got)
		}
	}
}

// TestKeysAppliesToNew: for any maps, the patch of the owned keys applied
// to the old map gives the new map's owned keys and the old map's others.
func TestKeysAppliesToNew(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		genMap := rapid.MapOf(rapid.SampledFrom([]string{"a", "b", "c", "d"}), rapid.SampledFrom([]string{"", "1", "2"}))
		owned := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "c", "d"}), 0, 4, rapid.ID).Draw(t, "owned")
		old, new := genMap.Draw(t, "old"), genMap.Draw(t, "new")
		fields := func(m map[string]string) Fields { return Fields{"labels": Keys(m, owned...)} }
		data, err := Diff(fields, old, new, "")
		if err != nil {
			t.Fatal(err)
		}
		got := maps.Clone(old)
		if data != nil {
			var p struct {
				Labels map[string]*string `json:"labels"`
			}
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatal(err)
			}
			for k, v := range p.Labels {
				if !slices.Contains(owned, k) {
					t.Fatalf("patch %s writes %s, which is not owned", data, k)
				}
				if v == nil {
					delete(got, k)
				} else {
					if got == nil {
						got = map[string]string{}
					}
					got[k] = *v
				}
			}
		}
		want := map[string]string{}
		for k, v := range old {
			if !slices.Contains(owned, k) {
				want[k] = v
			}
		}
		for _, k := range owned {
			if v, ok := new[k]; ok {
				want[k] = v
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("old + patch %s (-want +got):\n%s", data, diff)
		}
	})
}

func TestFinalizer(t *testing.T) {
	tests := []struct {
		name string
		have []string
		want bool
		out  string
	}{
		{name: "add to none", want: true, out: `{"metadata":{"finalizers":["f"],"resourceVersion":"5"}}`},
		{name: "add keeps others first", have: []string{"a"}, want: true, out: `{"metadata":{"finalizers":["a","f"],"resourceVersion":"5"}}`},
		{name: "already there", have: []string{"f"}, want: true},
		{name: "remove keeps order", have: []string{"a", "f", "b"}, out: `{"metadata":{"finalizers":["a","b"],"resourceVersion":"5"}}`},
		{name: "remove last", have: []string{"f"}, out: `{"metadata":{"finalizers":null,"resourceVersion":"5"}}`},
		{name: "already gone", have: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Finalizer(tt.have, "f", tt.want, "5")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.out, string(got)); diff != "" {
				t.Errorf("Finalizer() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSendAgainstClient(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1"}, Finalizers: []string{"x"}}}
	client := fake.NewClientset(node)
	owned := func(n *corev1.Node) Fields { return Fields{"metadata": Fields{"labels": n.Labels}} }
	desired := node.DeepCopy()
	desired.Labels = map[string]string{"b": "2"}
	data, err := Diff(owned, node, desired, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Send(context.Background(), client.CoreV1().Nodes().Patch, "n", data, "test")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"b": "2"}, got.Labels); diff != "" {
		t.Errorf("labels after patch (-want +got):\n%s", diff)
	}
	fin, _ := Finalizer(got.Finalizers, "x", false, "")
	got, err = Send(context.Background(), client.CoreV1().Nodes().Patch, "n", fin, "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 0 {
		t.Errorf("finalizers after removal: %v", got.Finalizers)
	}
	actions := client.Actions()
	if len(actions) != 2 {
		t.Fatalf("got %d actions, want 2", len(actions))
	}
	for _, a := range actions {
		if pt := a.(interface{ GetPatchType() types.PatchType }).GetPatchType(); pt != types.MergePatchType {
			t.Errorf("patch type %s, want merge patch", pt)
		}
	}
}

// TestDiffAppliesToNew checks the defining property: old with the patch
// applied (RFC 7386) equals new, for any label maps and lists.
func TestDiffAppliesToNew(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		genMap := rapid.MapOf(rapid.SampledFrom([]string{"a", "b", "c", "d"}), rapid.SampledFrom([]string{"", "1", "2"}))
		genList := rapid.SliceOfN(rapid.SampledFrom([]string{"x", "y", "z"}), 0, 3)
		fields := func(m map[string]string, l []string) Fields {
			return Fields{"metadata": Fields{"labels": m, "finalizers": l}}
		}
		old := fields(genMap.Draw(t, "oldLabels"), genList.Draw(t, "oldList"))
		new := fields(genMap.Draw(t, "newLabels"), genList.Draw(t, "newList"))
		data, err := diffFields(old, new, "")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := normalize(old)
		n, _ := normalize(new)
		if data == nil {
			if diff := cmp.Diff(prune(n), prune(o)); diff != "" {
				t.Fatalf("no patch although old and new differ:\n%s", diff)
			}
			return
		}
		var p map[string]any
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(prune(n), prune(apply(o, p))); diff != "" {
			t.Fatalf("old + patch != new (-new +applied):\n%s", diff)
		}
	})
}

// apply is RFC 7386's MergePatch.
func apply(target, patch map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range target {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil {
			delete(out, k)
			continue
		}
		if pm, ok := v.(map[string]any); ok {
			tm, _ := out[k].(map[string]any)
			if tm == nil {
				tm = map[string]any{}
			}
			out[k] = apply(tm, pm)
			continue
		}
		out[k] = v
	}
	return out
}

// prune drops nil members and empty objects, which a merge patch cannot
// tell from absent ones.
func prune(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			if p := prune(sub); len(p) > 0 {
				out[k] = p
			}
			continue
		}
		if v != nil {
			out[k] = v
		}
	}
	return out
}

// TestSendStrategic: the strategic sends say so, with the field manager
// and subresource; RemoveFinalizerStrategic names the finalizer alone.
func TestSendStrategic(t *testing.T) {
	var gotType types.PatchType
	var gotData []byte
	var gotOpts metav1.PatchOptions
	var gotSub []string
	fn := func(_ context.Context, _ string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (string, error) {
		gotType, gotData, gotOpts, gotSub = pt, data, opts, sub
		return "ok", nil
	}
	data := RemoveFinalizerStrategic("example.com/f")
	if _, err := SendStrategic(context.Background(), fn, "n1", data, "mcm", "status"); err != nil {
		t.Fatal(err)
	}
	if gotType != types.StrategicMergePatchType || gotOpts.FieldManager != "mcm" || !slices.Equal(gotSub, []string{"status"}) {
		t.Errorf("sent %s with %+v to %v", gotType, gotOpts, gotSub)
	}
	if want := `{"metadata":{"$deleteFromPrimitiveList/finalizers":["example.com/f"]}}`; string(gotData) != want {
		t.Errorf("patch %s, want %s", gotData, want)
	}
}
