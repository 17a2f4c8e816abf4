package cli

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPrintObject(t *testing.T) {
	v := map[string]any{"name": "web", "replicas": 3, "sets": []string{"web-a", "web-b"}}
	tests := []struct{ format, want string }{
		{"yaml", "name: web\nreplicas: 3\nsets:\n- web-a\n- web-b\n"},
		{"json", "{\n    \"name\": \"web\",\n    \"replicas\": 3,\n    \"sets\": [\n        \"web-a\",\n        \"web-b\"\n    ]\n}\n"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := printObject(&b, tt.format, v); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, b.String()); diff != "" {
			t.Errorf("-o %s (-want +got):\n%s", tt.format, diff)
		}
	}
}
