package promreg

import corev1 "k8s.io/api/core/v1"

// ConditionValue is MCM's gauge value of a condition status, for the
// conditions of machines (their nodes', corev1.ConditionStatus), sets and
// deployments (v1alpha1.ConditionStatus, the same strings) alike: True 1,
// False 0, Unknown 2; a status that is none of these is 0, as in MCM.
func ConditionValue[S ~string](status S) float64 {
	switch corev1.ConditionStatus(status) {
	case corev1.ConditionTrue:
		return 1
	case corev1.ConditionUnknown:
		return 2
	default:
		return 0
	}
}

// BoolValue is a flag's gauge value: 1 or 0.
func BoolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
