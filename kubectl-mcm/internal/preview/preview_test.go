package preview

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/deployment"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func current() *v1alpha1.MachineDeployment {
	d := &v1alpha1.MachineDeployment{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "uid-web"}}
	d.Spec.Replicas = 6
	d.Spec.Template.Labels = map[string]string{"pool": "web"}
	d.Spec.Template.Spec.Class = v1alpha1.ClassSpec{Kind: "MachineClass", Name: "small"}
	surge, unavailable := intstr.FromInt32(2), intstr.FromInt32(0)
	d.Spec.Strategy = v1alpha1.MachineDeploymentStrategy{Type: v1alpha1.RollingUpdateMachineDeploymentStrategyType,
		RollingUpdate: &v1alpha1.RollingUpdateMachineDeployment{UpdateConfiguration: v1alpha1.UpdateConfiguration{MaxSurge: &surge, MaxUnavailable: &unavailable}}}
	return d
}

func TestPropose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change Change
		edit   func(d *v1alpha1.MachineDeployment)
		err    string
	}{
		{"class", Change{Class: "big"}, func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" }, ""},
		{"set a number", Change{Sets: []string{"replicas=9"}}, func(d *v1alpha1.MachineDeployment) { d.Spec.Replicas = 9 }, ""},
		{"set with spec. and a new map", Change{Sets: []string{"spec.template.spec.nodeTemplate.metadata.labels.pool=b"}},
			func(d *v1alpha1.MachineDeployment) {
				d.Spec.Template.Spec.NodeTemplateSpec.Labels = map[string]string{"pool": "b"}
			}, ""},
		{"a string that reads as a boolean", Change{Sets: []string{`template.metadata.labels.node\.kubernetes\.io/spot=true`}},
			func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Labels["node.kubernetes.io/spot"] = "true" }, ""},
		{"class and set", Change{Class: "big", Sets: []string{"paused=true"}},
			func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big"; d.Spec.Paused = true }, ""},
		{"file", Change{File: []byte("kind: MachineDeployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n  template:\n    spec:\n      class: {name: x}\n")},
			func(d *v1alpha1.MachineDeployment) {
				d.Spec = v1alpha1.MachineDeploymentSpec{Replicas: 2}
				d.Spec.Template.Spec.Class.Name = "x"
			}, ""},
		{"misspelt path", Change{Sets: []string{"replicaz=3"}}, nil, "unknown field"},
		{"wrong type", Change{Sets: []string{"replicas=many"}}, nil, "does not take it"},
		{"into a scalar", Change{Sets: []string{"replicas.x=1"}}, nil, "replicas is not an object"},
		{"no value", Change{Sets: []string{"replicas"}}, nil, "want PATH=VALUE"},
		{"nothing", Change{}, nil, "nothing proposed"},
		{"file and class", Change{File: []byte("{}"), Class: "x"}, nil, "cannot be combined"},
		{"another deployment's file", Change{File: []byte("metadata: {name: db}\n")}, nil, `holds MachineDeployment "db"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := current()
			got, err := Propose(cur, tc.change)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := current()
			tc.edit(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("proposed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(current(), cur); diff != "" {
				t.Errorf("the current deployment changed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderGolden(t *testing.T) {
	yes := true
	old := &v1alpha1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Annotations: map[string]string{v1alpha1.RevisionAnnotation: "1"},
		OwnerReferences: []metav1.OwnerReference{{UID: "uid-web", Controller: &yes}}}}
	old.Spec.Replicas = 6
	old.Spec.Template = current().Spec.Template
	var b strings.Builder
	for _, change := range []Change{
		{Class: "big"},
		{Sets: []string{"template.spec.nodeTemplate.metadata.labels.pool=b"}},
		{Sets: []string{"replicas=8"}},
		{Sets: []string{"strategy.type=InPlaceUpdate", "strategy.rollingUpdate=null", "strategy.inPlaceUpdate.orchestrationType=Auto",
			"strategy.inPlaceUpdate.maxUnavailable=2", "strategy.inPlaceUpdate.maxSurge=0", "template.spec.class.name=big"}},
	} {
		proposed, err := Propose(current(), change)
		if err != nil {
			t.Fatal(err)
		}
		p, err := deployment.PreviewChange(current(), proposed, []*v1alpha1.MachineSet{old})
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"$ kubectl mcm preview web"}
		if change.Class != "" {
			args = append(args, "--class", change.Class)
		}
		for _, s := range change.Sets {
			args = append(args, "--set", s)
		}
		b.WriteString(strings.Join(args, " ") + "\n")
		b.WriteString(Render("web", p) + "\n")
	}
	path := filepath.Join("testdata", "render.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}
