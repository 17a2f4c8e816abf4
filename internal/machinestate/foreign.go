package machinestate

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// ForeignMachines reads the set's v1alpha1.ForeignMachinesAnnotation: the
// UIDs of the machines the set controls but did not create, as its
// MachineSet controller found them (package machineset decides and writes
// it; those being deleted stay listed while they exist). The replacement
// budget reads it so that a machine forged with a set's controller
// reference counts for nothing in the set's deployment; the MachineSet
// controller reads it back after a restart. nil when the set lists none.
func ForeignMachines(set *v1alpha1.MachineSet) map[types.UID]bool {
	v := set.Annotations[v1alpha1.ForeignMachinesAnnotation]
	if v == "" {
		return nil
	}
	out := map[types.UID]bool{}
	for uid := range strings.SplitSeq(v, ",") {
		if uid = strings.TrimSpace(uid); uid != "" {
			out[types.UID(uid)] = true
		}
	}
	return out
}
