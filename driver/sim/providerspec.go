package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
	"github.com/mcmkit/mcm/driver"
)

// ProviderName is the MachineClass provider the sim serves. Classes with
// another non-empty provider are rejected with InvalidArgument.
const ProviderName = "sim"

// CredentialsKey is the secret key holding the sim's API token. Every
// operation except GetVolumeIDs requires it.
const CredentialsKey = "apiToken"

// CSIDriverName is the CSI driver whose volumes GetVolumeIDs reports.
const CSIDriverName = "csi.sim.mcmkit.io"

// ProviderSpec is the schema of a sim MachineClass's providerSpec. See the
// package documentation for the JSON form and the rules.
type ProviderSpec struct {
	// Zone to create VMs in. Required.
	Zone string `json:"zone"`
	// InstanceType of the VMs. Required.
	InstanceType string `json:"instanceType"`
	// Capacity of each VM, such as {"cpu": "2", "memory": "8Gi"}; defaults
	// to the instance type's capacity in Options.InstanceTypes.
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Labels for the VMs, reported in Cloud.VMs.
	Labels map[string]string `json:"labels,omitempty"`
	// BootDelay overrides Options.BootDelay for these VMs.
	BootDelay *metav1.Duration `json:"bootDelay,omitempty"`
	// BootJitter overrides Options.BootJitter for these VMs: "0s" makes
	// every VM of the class boot after exactly its boot delay.
	BootJitter *metav1.Duration `json:"bootJitter,omitempty"`
	// DeleteDelay overrides Options.DeleteDelay for these VMs.
	DeleteDelay *metav1.Duration `json:"deleteDelay,omitempty"`
	// RequireInitialization makes new VMs wait for InitializeMachine:
	// until it runs, GetMachineStatus returns Uninitialized.
	RequireInitialization bool `json:"requireInitialization,omitempty"`
	// Cluster is the cluster the VMs are tagged with, beside the class's
	// namespace and name (see ClassTags), as a real providerSpec carries
	// a kubernetes.io/cluster/<name> tag. Empty means the class's
	// namespace: in Gardener's layout each cluster's classes have a
	// namespace of their own.
	Cluster string `json:"cluster,omitempty"`
	// KubeletVersion is the version the VMs' kubelets report in their
	// Nodes' status.nodeInfo.kubeletVersion, a semantic version such as
	// "v1.38.0". Empty means DefaultKubeletVersion. An in-place update
	// (Agent) gives the VM the version of the class it updates to.
	KubeletVersion string `json:"kubeletVersion,omitempty"`
	// InPlaceUpdate opts the VMs into the simulated node agent (Agent),
	// which carries out MCM's in-place updates on them. Nil: no agent.
	InPlaceUpdate *InPlaceUpdate `json:"inPlaceUpdate,omitempty"`
}

// RawExtension returns s encoded for MachineClass.ProviderSpec.
func (s ProviderSpec) RawExtension() runtime.RawExtension {
	raw, err := json.Marshal(s)
	if err != nil {
		// Strings, quantities, durations and a bool always encode.
		panic(fmt.Sprintf("sim: encode ProviderSpec: %v", err))
	}
	return runtime.RawExtension{Raw: raw}
}

// specFields lists the providerSpec keys, for the unknown-field message.
var specFields = []string{"bootDelay", "bootJitter", "capacity", "cluster", "deleteDelay", "inPlaceUpdate", "instanceType", "kubeletVersion", "labels", "requireInitialization", "zone"}

// decodeProviderSpec decodes a class's providerSpec strictly: unknown
// fields, values of the wrong type, unparsable quantities and durations and
// missing required fields each give a *field.Error with the field's path.
// It decodes field by field instead of relying on encoding/json's strict
// mode, because only that way every error carries its path as data.
func decodeProviderSpec(raw runtime.RawExtension) (ProviderSpec, field.ErrorList) {
	root := field.NewPath("providerSpec")
	var spec ProviderSpec
	data := raw.Raw
	if len(data) == 0 && raw.Object != nil {
		var err error
		if data, err = json.Marshal(raw.Object); err != nil {
			return spec, field.ErrorList{field.Invalid(root, field.OmitValueType{}, "cannot be encoded as JSON")}
		}
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return spec, field.ErrorList{field.Required(root, "the sim needs at least zone and instanceType")}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return spec, field.ErrorList{field.TypeInvalid(root, field.OmitValueType{}, "must be a JSON object")}
	}

	var errs field.ErrorList
	keys := slices.Sorted(maps.Keys(fields))
	for _, key := range keys {
		value, path := fields[key], root.Child(key)
		switch key {
		case "zone":
			errs = append(errs, decodeInto(path, value, &spec.Zone, "must be a string")...)
		case "instanceType":
			errs = append(errs, decodeInto(path, value, &spec.InstanceType, "must be a string")...)
		case "capacity":
			spec.Capacity, errs = decodeCapacity(path, value, errs)
		case "labels":
			spec.Labels, errs = decodeLabels(path, value, errs)
		case "bootDelay":
			spec.BootDelay, errs = decodeDuration(path, value, errs)
		case "bootJitter":
			spec.BootJitter, errs = decodeDuration(path, value, errs)
		case "deleteDelay":
			spec.DeleteDelay, errs = decodeDuration(path, value, errs)
		case "requireInitialization":
			errs = append(errs, decodeInto(path, value, &spec.RequireInitialization, "must be true or false")...)
		case "cluster":
			errs = append(errs, decodeInto(path, value, &spec.Cluster, "must be a string")...)
		case "kubeletVersion":
			spec.KubeletVersion, errs = decodeKubeletVersion(path, value, errs)
		case "inPlaceUpdate":
			spec.InPlaceUpdate, errs = decodeInPlaceUpdate(path, value, errs)
		default:
			errs = append(errs, field.Forbidden(path, "unknown field; the sim providerSpec has "+strings.Join(specFields, ", ")))
		}
	}
	// A value of the wrong type was reported already; only report absence.
	if spec.Zone == "" && !hasErrorAt(errs, root.Child("zone")) {
		errs = append(errs, field.Required(root.Child("zone"), ""))
	}
	if spec.InstanceType == "" && !hasErrorAt(errs, root.Child("instanceType")) {
		errs = append(errs, field.Required(root.Child("instanceType"), ""))
	}
	return spec, errs
}

func hasErrorAt(errs field.ErrorList, path *field.Path) bool {
	for _, e := range errs {
		if e.Field == path.String() {
			return true
		}
	}
	return false
}

// decodeInto decodes value into target. Any decoding error means a wrong
// JSON type here (the value itself is valid JSON), reported with detail.
func decodeInto[T any](path *field.Path, value json.RawMessage, target *T, detail string) field.ErrorList {
	if err := json.Unmarshal(value, target); err != nil {
		return field.ErrorList{field.TypeInvalid(path, string(value), detail)}
	}
	return nil
}

func decodeCapacity(path *field.Path, value json.RawMessage, errs field.ErrorList) (corev1.ResourceList, field.ErrorList) {
	var entries map[string]json.RawMessage
	if e := decodeInto(path, value, &entries, "must be an object of resource quantities"); e != nil {
		return nil, append(errs, e...)
	}
	if entries == nil {
		return nil, errs
	}
	capacity := corev1.ResourceList{}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		var q resource.Quantity
		if err := json.Unmarshal(entries[name], &q); err != nil {
			errs = append(errs, field.Invalid(path.Key(name), string(entries[name]), `must be a quantity such as "2" or "8Gi"`))
			continue
		}
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Key(name), q.String(), "must not be negative"))
			continue
		}
		capacity[corev1.ResourceName(name)] = q
	}
	return capacity, errs
}

func decodeLabels(path *field.Path, value json.RawMessage, errs field.ErrorList) (map[string]string, field.ErrorList) {
	var entries map[string]json.RawMessage
	if e := decodeInto(path, value, &entries, "must be an object of strings"); e != nil {
		return nil, append(errs, e...)
	}
	if entries == nil {
		return nil, errs
	}
	labels := make(map[string]string, len(entries))
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		var s string
		if e := decodeInto(path.Key(k), entries[k], &s, "must be a string"); e != nil {
			errs = append(errs, e...)
			continue
		}
		labels[k] = s
	}
	return labels, errs
}

func decodeDuration(path *field.Path, value json.RawMessage, errs field.ErrorList) (*metav1.Duration, field.ErrorList) {
	var s string
	if e := decodeInto(path, value, &s, `must be a duration string such as "30s"`); e != nil {
		return nil, append(errs, e...)
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return nil, append(errs, field.Invalid(path, s, `must be a duration such as "30s" or "2m"`))
	case d < 0:
		return nil, append(errs, field.Invalid(path, s, "must not be negative"))
	}
	return &metav1.Duration{Duration: d}, errs
}

// classSpec decodes and checks a request's class against the cloud's
// options. It returns the spec with the capacity defaulted.
func (c *Cloud) classSpec(class *v1alpha1.MachineClass) (ProviderSpec, error) {
	if class == nil {
		return ProviderSpec{}, driver.NewError(driver.InvalidArgument, "request has no MachineClass")
	}
	spec, errs := decodeProviderSpec(class.ProviderSpec)
	if class.Provider != "" && class.Provider != ProviderName {
		errs = append(errs, field.NotSupported(field.NewPath("provider"), class.Provider, []string{ProviderName}))
	}
	if len(c.opts.Zones) > 0 && spec.Zone != "" && !slices.Contains(c.opts.Zones, spec.Zone) {
		errs = append(errs, field.NotSupported(field.NewPath("providerSpec", "zone"), spec.Zone, c.opts.Zones))
	}
	typeCapacity, knownType := c.opts.InstanceTypes[spec.InstanceType]
	if len(c.opts.InstanceTypes) > 0 && spec.InstanceType != "" && !knownType {
		errs = append(errs, field.NotSupported(field.NewPath("providerSpec", "instanceType"), spec.InstanceType,
			slices.Sorted(maps.Keys(c.opts.InstanceTypes))))
	}
	if len(errs) > 0 {
		return spec, invalid(fmt.Sprintf("invalid MachineClass %s/%s", class.Namespace, class.Name), errs)
	}
	if len(spec.Capacity) == 0 {
		spec.Capacity = typeCapacity.DeepCopy()
	}
	return spec, nil
}

// invalid returns an InvalidArgument error whose cause joins the field
// errors, so callers find each path with errors.As(err, **field.Error).
func invalid(message string, errs field.ErrorList) error {
	causes := make([]error, len(errs))
	for i, e := range errs {
		causes[i] = e
	}
	return &driver.Error{Code: driver.InvalidArgument, Message: message, Cause: errors.Join(causes...)}
}

// checkCredentials checks the API token in the secret and, if needUserData,
// the user data, returning the user data.
func (c *Cloud) checkCredentials(secret *corev1.Secret, needUserData bool) ([]byte, error) {
	data := field.NewPath("secret", "data")
	var values map[string][]byte
	if secret != nil {
		values = secret.Data
	}
	var errs field.ErrorList
	if len(values[CredentialsKey]) == 0 {
		errs = append(errs, field.Required(data.Key(CredentialsKey), "the sim's API token"))
	}
	if needUserData && len(values[v1alpha1.UserDataKey]) == 0 {
		errs = append(errs, field.Required(data.Key(v1alpha1.UserDataKey), "the VM's user data"))
	}
	if len(errs) > 0 {
		return nil, invalid("invalid secret", errs)
	}
	if c.opts.APIToken != "" && string(values[CredentialsKey]) != c.opts.APIToken {
		return nil, driver.NewError(driver.Unauthenticated, "the API token in the secret is not valid for this cloud")
	}
	return values[v1alpha1.UserDataKey], nil
}
