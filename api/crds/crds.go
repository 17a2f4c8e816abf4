package crds

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// FieldManager is the server-side apply field manager Install uses.
const FieldManager = "mcm"

//go:embed *.yaml
var manifests embed.FS

var crdResource = schema.GroupVersionResource{
	Group:    "apiextensions.k8s.io",
	Version:  "v1",
	Resource: "customresourcedefinitions",
}

// Files returns the embedded CRD manifests by file name, in name order.
func Files() (map[string][]byte, error) {
	names, err := fs.Glob(manifests, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing embedded CRDs: %w", err)
	}
	out := make(map[string][]byte, len(names))
	for _, name := range names {
		data, err := manifests.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading embedded CRD %s: %w", name, err)
		}
		out[name] = data
	}
	return out, nil
}

// Objects decodes the embedded CRDs, sorted by name. Each call returns fresh
// objects the caller may modify.
func Objects() ([]*unstructured.Unstructured, error) {
	files, err := Files()
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for name, data := range files {
		obj := &unstructured.Unstructured{}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		if err := dec.Decode(&obj.Object); err != nil {
			return nil, fmt.Errorf("decoding embedded CRD %s: %w", name, err)
		}
		if obj.GetKind() != "CustomResourceDefinition" || obj.GetName() == "" {
			return nil, fmt.Errorf("embedded file %s is not a named CustomResourceDefinition", name)
		}
		objs = append(objs, obj)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	return objs, nil
}

// Install applies all CRDs with the given config and waits until each one is
// Established. See InstallWithClient.
func Install(ctx context.Context, cfg *rest.Config) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating dynamic client: %w", err)
	}
	return InstallWithClient(ctx, client)
}

// InstallWithClient applies all CRDs through client (server-side apply, field
// manager FieldManager, forcing ownership of the fields it sets) and waits
// until the API server reports each one Established. A CRD whose names are
// rejected (NamesAccepted=False) fails at once with the server's message
// instead of waiting for the context to end.
func InstallWithClient(ctx context.Context, client dynamic.Interface) error {
	objs, err := Objects()
	if err != nil {
		return err
	}
	crds := client.Resource(crdResource)
	for _, obj := range objs {
		if _, err := crds.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying CRD %s: %w", obj.GetName(), err)
		}
	}
	for _, obj := range objs {
		if err := waitEstablished(ctx, crds, obj.GetName()); err != nil {
			return err
		}
	}
	return nil
}

// errNamesRejected stops the wait when the server will never establish a CRD.
var errNamesRejected = errors.New("names not accepted")

func waitEstablished(ctx context.Context, crds dynamic.ResourceInterface, name string) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = "not found"
			return false, nil
		}
		if err != nil {
			// Transient API errors are retried until the context ends; the
			// last one is reported then.
			last = err.Error()
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		established := false
		for _, c := range conditions {
			cond, ok := c.(map[string]any)
			if !ok {
				continue
			}
			switch cond["type"] {
			case "Established":
				established = cond["status"] == "True"
			case "NamesAccepted":
				if cond["status"] == "False" {
					return false, fmt.Errorf("%w: %v", errNamesRejected, cond["message"])
				}
			}
		}
		last = "not yet Established"
		return established, nil
	})
	if err != nil {
		if errors.Is(err, errNamesRejected) {
			return fmt.Errorf("CRD %s: %w", name, err)
		}
		return fmt.Errorf("waiting for CRD %s to be Established (last seen: %s): %w", name, last, err)
	}
	return nil
}
