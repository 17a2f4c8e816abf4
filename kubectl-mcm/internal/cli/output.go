package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// printObject writes v as JSON (indented, as kubectl) or YAML.
func printObject(w io.Writer, format string, v any) error {
	raw, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return fmt.Errorf("encoding the output: %w", err)
	}
	if format == "yaml" {
		if raw, err = yamlOf(raw); err != nil {
			return fmt.Errorf("encoding the output as YAML: %w", err)
		}
		_, err = w.Write(raw)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", raw)
	return err
}

// yamlOf turns JSON into YAML with apimachinery's YAML serializer, the
// encoding kubectl's -o yaml uses.
func yamlOf(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, nil, nil, kjson.SerializerOptions{Yaml: true})
	if err := s.Encode(rawObject(raw), &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// rawObject is JSON the serializer can take: it encodes only
// runtime.Objects, and encodes them with encoding/json.
type rawObject json.RawMessage

func (rawObject) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (r rawObject) DeepCopyObject() runtime.Object { return slices.Clone(r) }

func (r rawObject) MarshalJSON() ([]byte, error) { return r, nil }
