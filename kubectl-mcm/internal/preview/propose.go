package preview

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/mcmkit/mcm/api/machine/v1alpha1"
)

// Change is what the user proposes; File excludes the others.
type Change struct {
	// File is a whole MachineDeployment, YAML or JSON.
	File []byte
	// Class is the name of the class the template should use.
	Class string
	// Sets are "path=value" changes of the spec.
	Sets []string
}

// Propose returns current with the change applied; current is not
// changed.
func Propose(current *v1alpha1.MachineDeployment, c Change) (*v1alpha1.MachineDeployment, error) {
	if len(c.File) == 0 && c.Class == "" && len(c.Sets) == 0 {
		return nil, errors.New("nothing proposed: give -f FILE, --class NAME or --set PATH=VALUE")
	}
	if len(c.File) > 0 {
		if c.Class != "" || len(c.Sets) > 0 {
			return nil, errors.New("-f gives the whole deployment; it cannot be combined with --class or --set")
		}
		return fromFile(current, c.File)
	}
	proposed := current.DeepCopy()
	if c.Class != "" {
		proposed.Spec.Template.Spec.Class.Name = c.Class
	}
	for _, s := range c.Sets {
		if err := setField(proposed, s); err != nil {
			return nil, fmt.Errorf("--set %s: %w", s, err)
		}
	}
	return proposed, nil
}

func fromFile(current *v1alpha1.MachineDeployment, raw []byte) (*v1alpha1.MachineDeployment, error) {
	var d v1alpha1.MachineDeployment
	if err := yaml.UnmarshalStrict(raw, &d); err != nil {
		return nil, fmt.Errorf("reading the proposed MachineDeployment: %w", err)
	}
	if d.Kind != "" && d.Kind != "MachineDeployment" {
		return nil, fmt.Errorf("the file holds a %s, not a MachineDeployment", d.Kind)
	}
	if d.Name != "" && d.Name != current.Name {
		return nil, fmt.Errorf("the file holds MachineDeployment %q, not %q", d.Name, current.Name)
	}
	proposed := current.DeepCopy()
	proposed.Spec = d.Spec
	return proposed, nil
}

// setField sets one dotted path of d's spec to a value.
func setField(d *v1alpha1.MachineDeployment, assignment string) error {
	path, value, ok := strings.Cut(assignment, "=")
	if !ok || path == "" {
		return errors.New("want PATH=VALUE")
	}
	keys := splitPath(strings.TrimPrefix(path, "spec."))
	raw, err := json.Marshal(d.Spec)
	if err != nil {
		return fmt.Errorf("encoding the spec: %w", err)
	}
	var typed any
	if err := yaml.Unmarshal([]byte(value), &typed); err != nil {
		typed = value
	}
	// The value as YAML first (replicas=5 is a number); where the field
	// wants a string (a label "true" or "5"), as written.
	var errs []error
	for _, v := range []any{typed, value} {
		var spec map[string]any
		if err := json.Unmarshal(raw, &spec); err != nil {
			return fmt.Errorf("decoding the spec: %w", err)
		}
		if err := put(spec, keys, v); err != nil {
			return err
		}
		next, err := json.Marshal(spec)
		if err != nil {
			return fmt.Errorf("encoding the spec: %w", err)
		}
		var out v1alpha1.MachineDeploymentSpec
		if err := strictJSON(next, &out); err != nil {
			errs = append(errs, err)
			continue
		}
		d.Spec = out
		return nil
	}
	return fmt.Errorf("the spec does not take it: %w", errors.Join(errs...))
}

// strictJSON decodes raw into out, refusing fields out has not, so that a
// misspelt path is an error rather than a change of nothing.
func strictJSON(raw []byte, out any) error {
	return yaml.UnmarshalStrict(raw, out)
}

// put sets keys in m to v, creating the maps on the way.
func put(m map[string]any, keys []string, v any) error {
	for i, k := range keys {
		if i == len(keys)-1 {
			m[k] = v
			return nil
		}
		next, ok := m[k].(map[string]any)
		if !ok {
			if m[k] != nil {
				return fmt.Errorf("%s is not an object", strings.Join(keys[:i+1], "."))
			}
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return errors.New("empty path")
}

// splitPath splits a dotted path, "\." being a dot within a key.
func splitPath(path string) []string {
	const escaped = "\x00"
	parts := strings.Split(strings.ReplaceAll(path, `\.`, escaped), ".")
	for i := range parts {
		parts[i] = strings.ReplaceAll(parts[i], escaped, ".")
	}
	return parts
}
