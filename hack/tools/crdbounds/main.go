// Command crdbounds adds size bounds to the parts of generated CRD schemas
// that come from Kubernetes types we cannot put markers on: label selectors
// and object-meta labels.
//
// The API server estimates the worst-case cost of every CEL rule from the
// schema. Without bounds, a rule that walks selector.matchLabels or
// matchExpressions is costed as if the map or list filled a whole request,
// and the CRD is refused. The bounds chosen are those Kubernetes itself
// enforces for labels (values of at most 63 characters, keys of at most 317)
// plus item counts far above anything a machine set needs.
//
// Usage: crdbounds FILE... (rewrites each file in place).
package main

import (
	"encoding/json"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const (
	maxLabelValueLength = 63  // validation.LabelValueMaxLength
	maxLabelKeyLength   = 317 // 253 (DNS prefix) + "/" + 63 (name)
	maxSelectorLabels   = 64
	maxExpressions      = 32
	maxExpressionValues = 64
	maxOperatorLength   = 16 // longest is DoesNotExist
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdbounds FILE...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := rewrite(path); err != nil {
			fmt.Fprintf(os.Stderr, "crdbounds: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func rewrite(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return fmt.Errorf("decoding: %w", err)
	}
	for i := range crd.Spec.Versions {
		if v := crd.Spec.Versions[i].Schema; v != nil && v.OpenAPIV3Schema != nil {
			bound(v.OpenAPIV3Schema, "")
		}
	}
	// Through a map, to drop the empty status controller-gen never writes;
	// keys come out sorted either way, as controller-gen writes them.
	raw, err := json.Marshal(&crd)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	delete(obj, "status")
	out, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding: %w", err)
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// bound walks the schema; name is the property name s is found under.
func bound(s *apiextensionsv1.JSONSchemaProps, name string) {
	if isLabelSelector(s) {
		boundSelector(s)
	}
	if name == "metadata" {
		if m, ok := s.Properties["labels"]; ok && m.AdditionalProperties != nil && m.AdditionalProperties.Schema != nil {
			m.AdditionalProperties.Schema.MaxLength = ptr(maxLabelValueLength)
			s.Properties["labels"] = m
		}
	}
	for k, p := range s.Properties {
		bound(&p, k)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		bound(s.Items.Schema, "")
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		bound(s.AdditionalProperties.Schema, "")
	}
}

func isLabelSelector(s *apiextensionsv1.JSONSchemaProps) bool {
	_, labels := s.Properties["matchLabels"]
	_, exprs := s.Properties["matchExpressions"]
	return labels && exprs && len(s.Properties) == 2
}

func boundSelector(s *apiextensionsv1.JSONSchemaProps) {
	labels := s.Properties["matchLabels"]
	labels.MaxProperties = ptr(maxSelectorLabels)
	if labels.AdditionalProperties != nil && labels.AdditionalProperties.Schema != nil {
		labels.AdditionalProperties.Schema.MaxLength = ptr(maxLabelValueLength)
	}
	s.Properties["matchLabels"] = labels

	exprs := s.Properties["matchExpressions"]
	exprs.MaxItems = ptr(maxExpressions)
	if exprs.Items != nil && exprs.Items.Schema != nil {
		item := exprs.Items.Schema
		setMaxLength(item, "key", maxLabelKeyLength)
		setMaxLength(item, "operator", maxOperatorLength)
		if values, ok := item.Properties["values"]; ok {
			values.MaxItems = ptr(maxExpressionValues)
			if values.Items != nil && values.Items.Schema != nil {
				values.Items.Schema.MaxLength = ptr(maxLabelValueLength)
			}
			item.Properties["values"] = values
		}
	}
	s.Properties["matchExpressions"] = exprs
}

func setMaxLength(s *apiextensionsv1.JSONSchemaProps, field string, n int64) {
	if p, ok := s.Properties[field]; ok {
		p.MaxLength = ptr(n)
		s.Properties[field] = p
	}
}

func ptr(n int64) *int64 { return &n }
