package mcmdriver

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	mcmv1 "github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// viaJSON converts between our API types and MCM's through the wire format
// they share (group machine.sapcloud.io/v1alpha1). Going through JSON
// rather than copying field by field keeps the conversion exact for every
// field both sides serialize, and yields a fresh object whose maps, slices
// and raw providerSpec bytes share nothing with the input: a driver that
// modifies its request cannot reach the informer cache the input came from.
func viaJSON[In, Out any](in *In) (*Out, error) {
	if in == nil {
		return nil, nil
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	out := new(Out)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, err
	}
	return out, nil
}

// machineToMCM and classToMCM convert a request's objects, failing with
// InvalidArgument: an object that does not convert cannot be served by any
// retry.
func machineToMCM(m *v1alpha1.Machine) (*mcmv1.Machine, error) {
	out, err := viaJSON[v1alpha1.Machine, mcmv1.Machine](m)
	if err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "converting Machine %s/%s to MCM's type: %w", m.Namespace, m.Name, err)
	}
	return out, nil
}

func classToMCM(c *v1alpha1.MachineClass) (*mcmv1.MachineClass, error) {
	out, err := viaJSON[v1alpha1.MachineClass, mcmv1.MachineClass](c)
	if err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "converting MachineClass %s/%s to MCM's type: %w", c.Namespace, c.Name, err)
	}
	return out, nil
}

// machineFromMCM and classFromMCM are the way back, for ToMCM.
func machineFromMCM(m *mcmv1.Machine) (*v1alpha1.Machine, error) {
	out, err := viaJSON[mcmv1.Machine, v1alpha1.Machine](m)
	if err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "converting MCM's Machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	return out, nil
}

func classFromMCM(c *mcmv1.MachineClass) (*v1alpha1.MachineClass, error) {
	out, err := viaJSON[mcmv1.MachineClass, v1alpha1.MachineClass](c)
	if err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "converting MCM's MachineClass %s/%s: %w", c.Namespace, c.Name, err)
	}
	return out, nil
}

// objects are a request's converted Machine and MachineClass and its
// copied Secret, in the target's types.
type objects[M, C any] struct {
	machine *M
	class   *C
	secret  *corev1.Secret
}

// toMCM converts the objects of one of our requests. Both sides use the
// same k8s.io/api module in one binary (minimal version selection picks
// ours), so the Secret keeps its type and is deep-copied only.
func toMCM(m *v1alpha1.Machine, c *v1alpha1.MachineClass, s *corev1.Secret) (objects[mcmv1.Machine, mcmv1.MachineClass], error) {
	var o objects[mcmv1.Machine, mcmv1.MachineClass]
	var err error
	if m != nil {
		if o.machine, err = machineToMCM(m); err != nil {
			return o, err
		}
	}
	if c != nil {
		if o.class, err = classToMCM(c); err != nil {
			return o, err
		}
	}
	o.secret = s.DeepCopy()
	return o, nil
}

// fromMCM converts the objects of an MCM request, for ToMCM.
func fromMCM(m *mcmv1.Machine, c *mcmv1.MachineClass, s *corev1.Secret) (objects[v1alpha1.Machine, v1alpha1.MachineClass], error) {
	var o objects[v1alpha1.Machine, v1alpha1.MachineClass]
	var err error
	if m != nil {
		if o.machine, err = machineFromMCM(m); err != nil {
			return o, err
		}
	}
	if c != nil {
		if o.class, err = classFromMCM(c); err != nil {
			return o, err
		}
	}
	o.secret = s.DeepCopy()
	return o, nil
}

// copyAddresses copies a response's addresses, so that neither side keeps
// a slice the other may still write to.
func copyAddresses(in []corev1.NodeAddress) []corev1.NodeAddress {
	return slices.Clone(in)
}

// copyPVSpecs deep-copies the persistent volume specs of a GetVolumeIDs
// request: they come from the informer cache.
func copyPVSpecs(in []*corev1.PersistentVolumeSpec) []*corev1.PersistentVolumeSpec {
	if in == nil {
		return nil
	}
	out := make([]*corev1.PersistentVolumeSpec, len(in))
	for i, s := range in {
		out[i] = s.DeepCopy()
	}
	return out
}

// copyMachineList copies ListMachines' provider ID to machine name map;
// nil becomes empty, as a driver that lists nothing.
func copyMachineList(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	maps.Copy(out, in)
	return out
}

// noResponse is the error for a driver that returns neither a response nor
// an error, which both contracts rule out; failing the call keeps a nil
// response from reaching a controller that would dereference it.
func noResponse(op driver.Operation) error {
	return driver.NewError(driver.Internal, fmt.Sprintf("%s returned neither a response nor an error", op))
}
