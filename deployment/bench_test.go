package deployment

import (
	"fmt"
	"testing"

	k8stesting "k8s.io/client-go/testing"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/machineset"
)

// BenchmarkRolloutWrites rolls n machines to a new template (maxSurge 1,
// maxUnavailable 0) with the MachineSet controller beside it, and reports
// the API writes each controller made per machine replaced: the figure
// the "every write earns its place" rule is about. Time per operation is
// mostly the fake API server's and the informers'.
func BenchmarkRolloutWrites(b *testing.B) {
	for _, n := range []int32{10, 30} {
		b.Run(fmt.Sprintf("machines=%d", n), func(b *testing.B) {
			var byManager = map[string]int{}
			var replaced int
			for b.Loop() {
				w := startFakeWorld(b, Options{}, testDeployment(n))
				w.eventually(w.settled(n))
				w.client.ClearActions()
				w.update(func(d *v1alpha1.MachineDeployment) { d.Spec.Template.Spec.Class.Name = "big" })
				w.eventually(w.settled(n))
				for _, a := range w.client.Actions() {
					if m := fieldManager(a); m != "" {
						byManager[m]++
						byManager[m+" "+a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource()]++
					}
				}
				replaced += int(n)
			}
			b.ReportMetric(float64(byManager[DefaultFieldManager])/float64(replaced), "deployment-writes/machine")
			b.ReportMetric(float64(byManager[machineset.DefaultFieldManager])/float64(replaced), "machineset-writes/machine")
			if testing.Verbose() {
				for k, v := range byManager {
					b.Logf("%s: %.2f per machine", k, float64(v)/float64(replaced))
				}
			}
		})
	}
}

// fieldManager names the writer of a write action, "" for reads and for
// writes without one (the test's own, and deletions, which carry none:
// they are counted by the controller that issues them below).
func fieldManager(a k8stesting.Action) string {
	switch a := a.(type) {
	case k8stesting.CreateActionImpl:
		return a.GetCreateOptions().FieldManager
	case k8stesting.PatchActionImpl:
		return a.GetPatchOptions().FieldManager
	case k8stesting.DeleteActionImpl:
		switch a.GetResource().Resource {
		case "machines":
			return machineset.DefaultFieldManager
		case "machinesets":
			return DefaultFieldManager
		}
	}
	return ""
}
