package sim

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
)

// DefaultKubeletVersion is the version a VM's kubelet reports when its
// class's providerSpec names none.
const DefaultKubeletVersion = "v1.37.1-sim"

// DefaultInPlaceRetryDelay is how long the agent waits before it tries a
// failed in-place update again when the providerSpec's
// inPlaceUpdate.retryDelay is not set.
const DefaultInPlaceRetryDelay = 30 * time.Second

// InPlaceUpdate is the providerSpec's inPlaceUpdate block: the simulated
// node agent on the class's VMs, as gardener-node-agent is on a Gardener
// worker's. The VM keeps the block of the class it was created with, and
// takes that of the class it is updated to.
type InPlaceUpdate struct {
	// Agent runs the agent on the VMs: only nodes of VMs whose block says
	// agent: true are updated.
	Agent bool `json:"agent,omitempty"`
	// UpdateDelay is how long an update takes, from the moment the agent
	// sees the node ReadyForUpdate to its result. Zero: at once.
	UpdateDelay *metav1.Duration `json:"updateDelay,omitempty"`
	// RetryDelay is how long the agent waits after a failed update
	// (update-result=failed on the node) before it tries again. Empty
	// means DefaultInPlaceRetryDelay.
	RetryDelay *metav1.Duration `json:"retryDelay,omitempty"`
}

// enabled reports whether u runs the agent; a nil block does not.
func (u *InPlaceUpdate) enabled() bool { return u != nil && u.Agent }

// updateDelay is the effective UpdateDelay.
func (u *InPlaceUpdate) updateDelay() time.Duration {
	if u == nil || u.UpdateDelay == nil {
		return 0
	}
	return u.UpdateDelay.Duration
}

// retryDelay is the effective RetryDelay.
func (u *InPlaceUpdate) retryDelay() time.Duration {
	if u == nil || u.RetryDelay == nil {
		return DefaultInPlaceRetryDelay
	}
	return u.RetryDelay.Duration
}

// deepCopy returns a copy that shares nothing with u.
func (u *InPlaceUpdate) deepCopy() *InPlaceUpdate {
	if u == nil {
		return nil
	}
	out := &InPlaceUpdate{Agent: u.Agent}
	if u.UpdateDelay != nil {
		out.UpdateDelay = &metav1.Duration{Duration: u.UpdateDelay.Duration}
	}
	if u.RetryDelay != nil {
		out.RetryDelay = &metav1.Duration{Duration: u.RetryDelay.Duration}
	}
	return out
}

// inPlaceFields lists the inPlaceUpdate keys, for the unknown-field message.
var inPlaceFields = []string{"agent", "retryDelay", "updateDelay"}

// decodeKubeletVersion decodes a kubeletVersion: a semantic version, as
// consumers of status.nodeInfo.kubeletVersion (kubectl, autoscalers,
// version skew checks) parse it.
func decodeKubeletVersion(path *field.Path, value json.RawMessage, errs field.ErrorList) (string, field.ErrorList) {
	var s string
	if e := decodeInto(path, value, &s, `must be a version string such as "v1.38.0"`); e != nil {
		return "", append(errs, e...)
	}
	if _, err := version.ParseSemantic(s); err != nil || !strings.HasPrefix(s, "v") {
		return "", append(errs, field.Invalid(path, s, `must be a semantic version with a leading v, such as "v1.38.0" or "v1.38.0-sim"`))
	}
	return s, errs
}

// decodeInPlaceUpdate decodes the inPlaceUpdate block strictly. Delays
// without agent: true are refused rather than ignored: they would do
// nothing.
func decodeInPlaceUpdate(path *field.Path, value json.RawMessage, errs field.ErrorList) (*InPlaceUpdate, field.ErrorList) {
	var fields map[string]json.RawMessage
	if e := decodeInto(path, value, &fields, "must be an object"); e != nil {
		return nil, append(errs, e...)
	}
	if fields == nil {
		return nil, errs
	}
	u := &InPlaceUpdate{}
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		v, p := fields[key], path.Child(key)
		switch key {
		case "agent":
			errs = append(errs, decodeInto(p, v, &u.Agent, "must be true or false")...)
		case "updateDelay":
			u.UpdateDelay, errs = decodeDuration(p, v, errs)
		case "retryDelay":
			u.RetryDelay, errs = decodeDuration(p, v, errs)
		default:
			errs = append(errs, field.Forbidden(p, "unknown field; inPlaceUpdate has "+strings.Join(inPlaceFields, ", ")))
		}
	}
	// An agent of the wrong type was reported already.
	if !u.Agent && !hasErrorAt(errs, path.Child("agent")) {
		for _, key := range []string{"updateDelay", "retryDelay"} {
			if _, ok := fields[key]; ok {
				errs = append(errs, field.Forbidden(path.Child(key), "needs agent: true: without the agent nothing updates the VMs"))
			}
		}
	}
	return u, errs
}
