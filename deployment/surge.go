package deployment

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// scaledValue resolves a maxSurge or maxUnavailable value against replicas.
// It reads values the way the API's validation accepts them: an integer, a
// string of digits (a plain number too) or digits followed by "%", a
// percentage of replicas. A percentage rounds up when roundUp is set and
// down otherwise. Results above what an int32 holds saturate.
func scaledValue(v intstr.IntOrString, replicas int32, roundUp bool) (int32, error) {
	switch v.Type {
	case intstr.Int:
		if v.IntVal < 0 {
			return 0, fmt.Errorf("%d is negative", v.IntVal)
		}
		return v.IntVal, nil
	case intstr.String:
		digits, percent := strings.CutSuffix(v.StrVal, "%")
		if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
			return 0, fmt.Errorf("%q is neither a number nor a percentage", v.StrVal)
		}
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			// Only too many digits get here.
			n = math.MaxInt64
		}
		if !percent {
			return int32(min(n, math.MaxInt32)), nil
		}
		hi, product := bits.Mul64(uint64(n), uint64(max(replicas, 0)))
		if hi != 0 {
			return math.MaxInt32, nil
		}
		scaled := product / 100
		if roundUp && product%100 != 0 {
			scaled++
		}
		return int32(min(scaled, math.MaxInt32)), nil
	}
	return 0, fmt.Errorf("unknown IntOrString type %d", v.Type)
}

// resolveFenceposts resolves maxSurge (rounding up) and maxUnavailable
// (rounding down) against replicas. When both come to 0 maxUnavailable
// becomes 1, as in Kubernetes: with no room either way a rollout could never
// take a step. A nil value counts as 0. The surge is bounded so that
// replicas + surge fits in an int32.
func resolveFenceposts(maxSurge, maxUnavailable *intstr.IntOrString, replicas int32) (surge, unavailable int32, err error) {
	if maxSurge != nil {
		if surge, err = scaledValue(*maxSurge, replicas, true); err != nil {
			return 0, 0, fmt.Errorf("maxSurge: %w", err)
		}
	}
	if maxUnavailable != nil {
		if unavailable, err = scaledValue(*maxUnavailable, replicas, false); err != nil {
			return 0, 0, fmt.Errorf("maxUnavailable: %w", err)
		}
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return min(surge, math.MaxInt32-max(replicas, 0)), unavailable, nil
}

// strategyType is the deployment's strategy, RollingUpdate when unset as the
// API documents.
func strategyType(d *v1alpha1.MachineDeployment) v1alpha1.MachineDeploymentStrategyType {
	if d.Spec.Strategy.Type == "" {
		return v1alpha1.DefaultMachineDeploymentStrategyType
	}
	return d.Spec.Strategy.Type
}

// isRollingUpdate reports whether the deployment rolls machines out gradually.
func isRollingUpdate(d *v1alpha1.MachineDeployment) bool {
	return strategyType(d) == v1alpha1.RollingUpdateMachineDeploymentStrategyType
}

// isInPlaceUpdate tells whether d rolls its machines in place.
func isInPlaceUpdate(d *v1alpha1.MachineDeployment) bool {
	return strategyType(d) == v1alpha1.InPlaceUpdateMachineDeploymentStrategyType
}

// rollingUpdateConfiguration returns the deployment's maxSurge and
// maxUnavailable for a rolling update, with the API's defaults (1 and 0) for
// unset values, so that an undefaulted object behaves like a defaulted one.
func rollingUpdateConfiguration(d *v1alpha1.MachineDeployment) (maxSurge, maxUnavailable *intstr.IntOrString) {
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		maxSurge, maxUnavailable = ru.MaxSurge, ru.MaxUnavailable
	}
	if maxSurge == nil {
		maxSurge = new(intstr.FromInt32(v1alpha1.DefaultMaxSurge))
	}
	if maxUnavailable == nil {
		maxUnavailable = new(intstr.FromInt32(v1alpha1.DefaultMaxUnavailable))
	}
	return maxSurge, maxUnavailable
}

// rolloutBounds returns how many machines the deployment may have above
// spec.replicas (surge) and how many of spec.replicas may be unavailable
// during a rollout, as MCM computes them:
//
//   - RollingUpdate: its maxSurge and maxUnavailable (resolveFenceposts);
//   - InPlaceUpdate: no surge; maxUnavailable from its own configuration, with
//     maxSurge counted as 0 for the fencepost rule when machines are picked
//     by hand (orchestrationType Manual), because then no machine is added;
//   - Recreate: 0 and 0: every machine is replaced at once, and the
//     deployment is only available again with all of them.
//
// unavailable never exceeds spec.replicas, and is 0 when spec.replicas is 0.
func rolloutBounds(d *v1alpha1.MachineDeployment) (surge, unavailable int32, err error) {
	replicas := d.Spec.Replicas
	switch strategyType(d) {
	case v1alpha1.RollingUpdateMachineDeploymentStrategyType:
		maxSurge, maxUnavailable := rollingUpdateConfiguration(d)
		surge, unavailable, err = resolveFenceposts(maxSurge, maxUnavailable, replicas)
	case v1alpha1.InPlaceUpdateMachineDeploymentStrategyType:
		ip := d.Spec.Strategy.InPlaceUpdate
		if ip == nil {
			return 0, 0, errors.New("strategy InPlaceUpdate without inPlaceUpdate")
		}
		maxSurge := ip.MaxSurge
		if ip.OrchestrationType == v1alpha1.OrchestrationTypeManual {
			maxSurge = nil
		}
		_, unavailable, err = resolveFenceposts(maxSurge, ip.MaxUnavailable, replicas)
	case v1alpha1.RecreateMachineDeploymentStrategyType:
		return 0, 0, nil
	default:
		return 0, 0, fmt.Errorf("unknown strategy type %q", d.Spec.Strategy.Type)
	}
	if err != nil {
		return 0, 0, err
	}
	return surge, min(unavailable, max(replicas, 0)), nil
}
